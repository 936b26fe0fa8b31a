"""Build the manpages-fr positive control: French man pages as the domain, English man pages beside them.

    python corpora/build_manpages.py [--work /tmp]

The domain's language is French, which the offline base (an English-only encoder on BERT's uncased English
vocabulary) barely saw, so continued pretraining on it should help a French task a lot: a positive control.

Sources (nothing else is read):
- Debian bookworm ``manpages-fr`` 4.18.1-1 (``<work>/manpages-fr_4.18.1-1_all.deb``; fetched with ``apt-get
  download manpages-fr=4.18.1-1`` when missing, checked against its sha256, unpacked there with ``dpkg-deb -x``);
- the English pages of the installed Debian packages ``manpages`` and ``manpages-dev`` 6.03-2 (``dpkg-query -L``).

A page is a regular file ``man<N>/<name>.<N>[suffix].gz`` (symlinks and ``.so`` stubs are aliases of another page)
whose ``.TH`` (man) or ``.Dt`` (mdoc) line names the same section N; any other file is left out. It is rendered
by man-db, ``man --nh --nj -l`` (groff -Tutf8 with the page's preprocessors, no hyphenation, no justification,
MANWIDTH columns so that no paragraph wraps), then ``col -b -x`` (no overstrikes, no tabs). The header and footer
lines (``LS(1) ... LS(1)``) are dropped, every line loses its indentation and inner runs of spaces, and a line at
the left margin is a heading. A page's text is its headings and lines, a blank line between sections, without
the French TRADUCTION section (the same translators' credits and licence notice on every page).

Writes (gzip, mtime 0, rows in id order) and prints the counts PROVENANCE.md records:
- ``tasks/manpages-fr-section/{train,validation,test}.jsonl.gz``: French text -> its page's section, see
  ``split_pages`` and ``task_rows``;
- ``manpages/fr-corpus.jsonl.gz``: every French page not in the task's validation or test split, one document
  per page (the existing corpora keep one document per source item too);
- ``manpages/en-corpus.jsonl.gz``: English pages, see ``english_corpus``.
Deterministic: the same packages and the same groff-base, man-db and bsdextrautils give the same bytes.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TASK_DIR = ROOT / "tasks" / "manpages-fr-section"
CORPUS_DIR = ROOT / "manpages"

FR_PACKAGE, FR_VERSION = "manpages-fr", "4.18.1-1"
FR_SHA256 = "ec29759cc0e4a44dc7719c1e32869d0060667049e584f09556f0d982b969ea33"
EN_PACKAGES, EN_VERSION = ("manpages", "manpages-dev"), "6.03-2"
TOOLS = ("groff-base", "man-db", "bsdextrautils")  # the renderer: recorded in the output, not pinned

SEED = 13
MIN_PAGES = 20  # a section with fewer pages is not a class of the task (its pages stay in the corpus)
TEST_SHARE, VALIDATION_SHARE = 0.3, 0.1  # of each section's pages
WINDOW_WORDS = 200  # words per task example
MAX_WINDOWS = 5  # examples per page at most: its first 1,000 words
MIN_LAST_WORDS = 100  # a page's last, shorter window is kept from this many words on
MANWIDTH = "4000"  # columns: no paragraph of these pages is that long, so none wraps
NOT_TEXT = {"TRADUCTION", "COLOPHON"}  # translators' credits (every French page) / the page's origin (English)
# headings left out of the task's text: the command lines, the lists of related pages (name(N) by name(N)) and
# the notices shared word for word by many pages (GNU and util-linux boilerplate, authors, copyright)
NOT_TASK = NOT_TEXT | {
    "SYNOPSIS", "VOIR AUSSI", "COPYRIGHT", "AUTEUR", "AUTEURS", "SIGNALER DES BOGUES", "SIGNALEMENTS DE BOGUES",
    "DISPONIBILITÉ",
}

PAGE_FILE = re.compile(r"^(?P<name>.+)\.(?P<section>[1-8])(?P<suffix>[a-z]*)\.gz$")
TITLE_LINE = re.compile(r"^\.(?:TH|Dt)\s+(?:\"[^\"]*\"|\S+)\s+\"?(?P<section>[1-9])")
# a section marker: "(1)", "(8)", "(1ssl)", alone or after a name ("LS(1)", "ls(1)")
SECTION_MARKER = re.compile(r"\(\s*[1-9][a-zA-Z]*\s*\)")
HEADER_OR_FOOTER = re.compile(r"\([1-9][a-zA-Z]*\)$")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def installed_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return out.stdout


def french_files(work: Path) -> tuple[Path, list[Path]]:
    """The unpacked manpages-fr package's root and its page files (downloaded and unpacked when missing)."""
    deb, root = work / f"{FR_PACKAGE}_{FR_VERSION}_all.deb", work / f"{FR_PACKAGE}-{FR_VERSION}"
    if not deb.is_file():
        subprocess.run(["apt-get", "download", f"{FR_PACKAGE}={FR_VERSION}"], cwd=work, check=True)
    if sha256_of(deb) != FR_SHA256:
        raise SystemExit(f"{deb}: sha256 is not {FR_SHA256}")
    if not (root / "usr/share/man/fr").is_dir():
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root, sorted((root / "usr/share/man/fr").glob("man[1-8]/*"))


def english_files() -> dict[str, list[Path]]:
    """Each English package's page files, as ``dpkg-query -L`` lists them."""
    out = {}
    for package in EN_PACKAGES:
        if installed_version(package) != EN_VERSION:
            raise SystemExit(f"{package} {EN_VERSION} must be installed (found {installed_version(package)!r})")
        listing = subprocess.run(["dpkg-query", "-L", package], capture_output=True, text=True, check=True).stdout
        out[package] = sorted(Path(p) for p in listing.split("\n") if re.match(r"/usr/share/man/man[1-8]/.", p))
    return out


def licences(copyright_file: Path) -> list[tuple[list[str], str]]:
    """(Files patterns, License) of each stanza of a Debian (DEP-5) copyright file."""
    stanzas = []
    for block in copyright_file.read_text(encoding="utf-8").split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.split("\n"):
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Files" in fields and "License" in fields:
            stanzas.append((fields["Files"].split(), fields["License"].split("\n")[0]))
    return stanzas


def licence_of(stanzas: list[tuple[list[str], str]], source_path: str) -> str:
    """The licence the copyright file gives a source path (the last matching stanza wins, as DEP-5 says)."""
    found = "unknown"
    for patterns, lic in stanzas:
        if any(fnmatch.fnmatchcase(source_path, p) for p in patterns):
            found = lic
    return found


def source_section(path: Path) -> str | None:
    """The section a page's own ``.TH``/``.Dt`` line names, or None (an alias: ``.so`` and nothing else)."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            m = TITLE_LINE.match(line)
            if m:
                return m.group("section")
    return None


def render(path: Path) -> list[str]:
    """The page as man-db formats it for a MANWIDTH-column terminal, overstrikes and tabs removed."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "MANWIDTH": MANWIDTH}
    man = subprocess.run(
        ["man", "--nh", "--nj", "-E", "UTF-8", "-l", str(path)], capture_output=True, env=env, check=True
    )
    plain = subprocess.run(["col", "-b", "-x"], input=man.stdout, capture_output=True, env=env, check=True)
    return plain.stdout.decode("utf-8").split("\n")


def parse(lines: list[str]) -> list[tuple[str, list[str]]]:
    """[(heading, lines)] of a rendered page, without its header and footer lines (they end in ``(N)``).

    mdoc pages rendered this way have neither; a man page without a date or source has a blank footer."""
    body = [ln.rstrip() for ln in lines if ln.strip()]
    if body and not body[0][0].isspace() and HEADER_OR_FOOTER.search(body[0]):
        body = body[1:]
    if body and not body[-1][0].isspace() and HEADER_OR_FOOTER.search(body[-1]):
        body = body[:-1]
    sections: list[tuple[str, list[str]]] = []
    for line in body:
        text = " ".join(line.split())
        if not line[0].isspace():
            sections.append((text, []))
        elif sections:
            sections[-1][1].append(text)
    return sections


def list_pages(package: str, files: list[Path], stanzas: list[tuple[list[str], str]]) -> list[dict]:
    """The pages among ``files`` (not yet rendered); aliases and files without a clear section are counted."""
    pages, left_out = [], Counter()
    for path in files:
        m = PAGE_FILE.match(path.name)
        if path.is_symlink():
            left_out["symlink (alias)"] += 1
        elif not m or path.parent.name != f"man{m.group('section')}":
            left_out["file name without a section"] += 1
        elif (found := source_section(path)) != m.group("section"):
            left_out[".so alias" if found is None else ".TH/.Dt names another section"] += 1
        else:
            name, section = m.group("name"), m.group("section")
            page = f"{name}.{section}{m.group('suffix')}"
            # the copyright files name source files: po/fr/man1/ls.1.po (manpages-l10n), man1/intro.1 (man-pages)
            source = f"po/fr/man{section}/{page}.po" if package == FR_PACKAGE else f"man{section}/{page}"
            pages.append({
                "id": f"{package}:{page}", "page": page, "name": name, "section": section, "package": package,
                "file": path, "path": "/usr/" + str(path).split("/usr/", 1)[1], "licence": licence_of(stanzas, source),
            })
    print(f"{package}: {len(pages)} pages; left out: {dict(sorted(left_out.items()))}")
    return pages


def rendered(page: dict) -> dict:
    """The page with its ``sections`` and its corpus ``text`` (the sections but NOT_TEXT)."""
    sections = parse(render(page["file"]))
    text = "\n\n".join("\n".join([h, *ls]) for h, ls in sections if h.upper() not in NOT_TEXT)
    return {**page, "sections": sections, "text": text}


def split_pages(pages: list[dict]) -> tuple[dict[str, list[dict]], list[str]]:
    """Task pages by split (per section: ids sorted, shuffled with SEED, TEST_SHARE to test, VALIDATION_SHARE to
    validation, the rest to train) and the sections left out for having fewer than MIN_PAGES pages."""
    by_section: dict[str, list[dict]] = {}
    for p in pages:
        by_section.setdefault(p["section"], []).append(p)
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    rare = []
    for section, items in sorted(by_section.items()):
        if len(items) < MIN_PAGES:
            rare.append(f"{section} ({len(items)} pages)")
            continue
        items = sorted(items, key=lambda p: p["id"])
        random.Random(f"{SEED}:{section}").shuffle(items)
        n_test, n_val = round(len(items) * TEST_SHARE), round(len(items) * VALIDATION_SHARE)
        splits["test"] += items[:n_test]
        splits["validation"] += items[n_test : n_test + n_val]
        splits["train"] += items[n_test + n_val :]
    return splits, rare


def task_rows(page: dict) -> list[dict]:
    """A page's examples: consecutive WINDOW_WORDS-word windows of its text, at most MAX_WINDOWS.

    The text is the page's lines in order from NAME and DESCRIPTION on, without the headings and the NOT_TASK
    sections, every section marker removed (``(8)``, also in ``ls(1)``): so window 0 is the NAME line and the
    start of DESCRIPTION, and neither the header nor a marker gives the label away. A last, shorter window is
    kept from MIN_LAST_WORDS words on (a page shorter than that gives its one window)."""
    lines = [ln for h, ls in page["sections"] if h.upper() not in NOT_TASK for ln in ls]
    text = "\n".join(" ".join(SECTION_MARKER.sub("", ln).split()) for ln in lines)
    pieces = re.findall(r"\S+\s*", text)  # each word with the space or line break after it
    rows = []
    for i in range(min(MAX_WINDOWS, (len(pieces) + WINDOW_WORDS - 1) // WINDOW_WORDS)):
        chunk = pieces[i * WINDOW_WORDS : (i + 1) * WINDOW_WORDS]
        if i and len(chunk) < MIN_LAST_WORDS:
            break
        rows.append({
            "id": f"{page['id']}#{i}", "text": "".join(chunk).strip(), "label": page["section"],
            "meta": {"page": page["page"], "window": i, "words": len(chunk)},
        })
    return rows


def corpus_row(page: dict, source: str) -> dict:
    meta = {"name": page["name"], "section": page["section"], "package": page["package"], "path": page["path"],
            "licence": page["licence"]}
    return {"id": page["id"], "text": page["text"], "source": source, "meta": meta}


def english_corpus(pages: dict[str, list[dict]], held_out: set[str], words_wanted: int) -> list[dict]:
    """English pages until they hold ``words_wanted`` words: first the ``manpages`` package (sections 1, 4-8,
    those of the French pages), then ``manpages-dev`` (2 and 3), each in sha256(id) order; a page whose
    name.section is a French validation or test page (its English original) is never taken."""
    out, total = [], 0
    for package in EN_PACKAGES:
        for page in sorted(pages[package], key=lambda p: hashlib.sha256(p["id"].encode()).hexdigest()):
            if total >= words_wanted:
                return out
            if f"{page['name']}.{page['section']}" not in held_out:
                out.append(corpus_row(rendered(page), "manpages-en"))
                total += len(out[-1]["text"].split())
    return out


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r["id"])
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8"))
    print(f"{path.relative_to(ROOT)}: {len(rows)} rows, {sum(len(r['text'].split()) for r in rows):,} words, "
          f"{path.stat().st_size:,} bytes, sha256 {sha256_of(path)}")


def main(work: Path) -> None:
    print("renderer:", ", ".join(f"{t} {installed_version(t)}" for t in TOOLS))
    fr_root, fr_paths = french_files(work)
    fr_stanzas = licences(fr_root / "usr/share/doc/manpages-fr/copyright")
    fr_pages = [rendered(p) for p in list_pages(FR_PACKAGE, fr_paths, fr_stanzas)]
    en_paths = english_files()
    en_stanzas = licences(Path("/usr/share/doc/manpages/copyright"))  # manpages-dev ships the same file
    en_pages = {package: list_pages(package, en_paths[package], en_stanzas) for package in EN_PACKAGES}

    splits, rare = split_pages(fr_pages)
    print("sections left out of the task:", ", ".join(rare) or "none")
    for split, pages in splits.items():
        rows = [r for p in pages for r in task_rows(p)]
        write_jsonl(TASK_DIR / f"{split}.jsonl.gz", rows)
        print(f"  {split}: {len(pages)} pages {dict(sorted(Counter(p['section'] for p in pages).items()))}; "
              f"examples {dict(sorted(Counter(r['label'] for r in rows).items()))}; "
              f"window 0 only {sum(r['meta']['window'] == 0 for r in rows)}")

    held_out = {p["id"] for s in ("validation", "test") for p in splits[s]}
    fr_corpus = [corpus_row(p, "manpages-fr") for p in fr_pages if p["id"] not in held_out]
    write_jsonl(CORPUS_DIR / "fr-corpus.jsonl.gz", fr_corpus)
    print("  sections:", dict(sorted(Counter(r["meta"]["section"] for r in fr_corpus).items())))
    fr_words = sum(len(r["text"].split()) for r in fr_corpus)
    held_names = {f"{p['name']}.{p['section']}" for s in ("validation", "test") for p in splits[s]}
    en_corpus = english_corpus(en_pages, held_names, fr_words)
    write_jsonl(CORPUS_DIR / "en-corpus.jsonl.gz", en_corpus)
    print("  sections:", dict(sorted(Counter(r["meta"]["section"] for r in en_corpus).items())),
          "packages:", dict(Counter(r["meta"]["package"] for r in en_corpus)),
          "licences:", dict(Counter(r["meta"]["licence"] for r in en_corpus).most_common()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp"), help="where the .deb is (or is downloaded to)")
    main(parser.parse_args().work)
