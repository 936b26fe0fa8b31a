"""Study tooling (not part of the domainbert package): score files, the A/A checks, rescoring and the research
scripts. studies/README.md lists the studies; the package never imports this folder."""
