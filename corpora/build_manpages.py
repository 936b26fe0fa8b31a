"""Build a man-page positive control: French (or Spanish) man pages as the domain, English man pages beside them.

    .venv/bin/python corpora/build_manpages.py [--work /tmp] [--language fr|es]

The domain's language is French (or Spanish), which the offline base (an English-only encoder on BERT's uncased
English vocabulary) barely saw, so continued pretraining on it should help a task in it a lot: a positive
control. What differs between languages (package, headings, outputs) is ``manpages_language.LANGUAGES``; the
text below says French for the language.

Sources (nothing else is read):
- Debian bookworm ``manpages-fr`` 4.18.1-1 (``<work>/manpages-fr_4.18.1-1_all.deb``; fetched with ``apt-get
  download manpages-fr=4.18.1-1`` when missing, checked against its sha256, unpacked there with ``dpkg-deb -x``),
  or ``manpages-es`` 4.18.1-1 likewise;
- the English pages of the installed Debian packages ``manpages`` and ``manpages-dev`` 6.03-2 (``dpkg-query -L``).

A page is a regular file ``man<N>/<name>.<N>[suffix].gz`` (symlinks and ``.so`` stubs are aliases of another page)
whose ``.TH`` (man) or ``.Dt`` (mdoc) line names the same section N; any other file is left out. It is rendered
by man-db, ``man --nh --nj -l`` (groff -Tutf8 with the page's preprocessors, no hyphenation, no justification,
MANWIDTH columns so that no paragraph wraps), then ``col -b -x`` (no overstrikes, no tabs). The header and footer
lines (``LS(1) ... LS(1)``) are dropped, every line loses its indentation and inner runs of spaces, and a line at
the left margin is a heading. A page's text is its headings and lines, a blank line between sections, without
the French TRADUCTION section (translators' credits and the same licence notice on every page): that section, or
an English page's source header (copyright and licence), is kept as the document's ``meta.notice``.

Writes (gzip, mtime 0, rows in id order) and prints the counts PROVENANCE.md records:
- ``tasks/manpages-fr-section/{train,validation,test}.jsonl.gz``: French text -> its page's section, see
  ``split_pages`` and ``task_rows``;
- ``manpages/fr-corpus.jsonl.gz``: every French page not in the task's validation or test split, one document
  per page (the existing corpora keep one document per source item too);
- ``manpages/en-corpus.jsonl.gz``: English pages, see ``english_corpus`` (``en-corpus-es.jsonl.gz`` for Spanish).
Deterministic: the same packages, the same groff-base, man-db and bsdextrautils, and langid.py (the project's
language identifier, hence the project's Python) give the same bytes.
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
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from manpages_language import LANGUAGES, Language  # noqa: E402

ROOT = Path(__file__).resolve().parent
CORPUS_DIR = ROOT / "manpages"

EN_PACKAGES, EN_VERSION = ("manpages", "manpages-dev"), "6.03-2"
TOOLS = ("groff-base", "man-db", "bsdextrautils")  # the renderer: recorded in the output, not pinned

SEED = 13
MIN_PAGES = 20  # a section with fewer pages in the package is no class of the task (its pages stay in the corpus)
TEST_SHARE, VALIDATION_SHARE = 0.3, 0.1  # of each section's pages
WINDOW_WORDS = 200  # words per task example
MAX_WINDOWS = 5  # examples per page at most: its first 1,000 words
MIN_LAST_WORDS = 100  # a page's last, shorter window is kept from this many words on
NOT_IN_TASK = re.compile(r"^intro\.")  # intro(N) describes section N itself ("La section 1 du manuel ...")
MANWIDTH = "4000"  # columns: no paragraph of these pages is that long, so none wraps
COLOPHON = "COLOPHON"  # an English page's origin; the translators' credits are the language's ``credits``

PAGE_FILE = re.compile(r"^(?P<name>.+)\.(?P<section>[1-8])(?P<suffix>[a-z]*)\.gz$")
TITLE_LINE = re.compile(r"^\.(?:TH|Dt)\s+(?:\"[^\"]*\"|\S+)\s+\"?(?P<section>[1-9])")
# a section marker: "(1)", "(8)", "(1ssl)", alone or after a name ("LS(1)", "ls(1)")
SECTION_MARKER = re.compile(r"\(\s*[1-9][a-zA-Z]*\s*\)")
HEADER_OR_FOOTER = re.compile(r"\([1-9][a-zA-Z]*\)$")
BOX_DRAWING = re.compile("[\u2500-\u257f]+")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def installed_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return out.stdout


def translated_files(work: Path, lang: Language) -> tuple[Path, list[Path]]:
    """The unpacked manpages-<code> package's root and its page files (downloaded and unpacked when missing)."""
    deb, root = work / f"{lang.package}_{lang.version}_all.deb", work / f"{lang.package}-{lang.version}"
    if not deb.is_file():
        subprocess.run(["apt-get", "download", f"{lang.package}={lang.version}"], cwd=work, check=True)
    if sha256_of(deb) != lang.sha256:
        raise SystemExit(f"{deb}: sha256 is not {lang.sha256}")
    if not (root / f"usr/share/man/{lang.code}").is_dir():
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root, sorted((root / f"usr/share/man/{lang.code}").glob("man[1-8]/*"))


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
    """[(heading, lines)] of a rendered page, without its header and footer lines (they end in ``(N)``) and
    without the box-drawing rules of tables (a table set to the page's width draws them MANWIDTH columns long).

    mdoc pages rendered this way have neither; a man page without a date or source has a blank footer."""
    body = [ln.rstrip() for ln in lines if ln.strip()]
    if body and not body[0][0].isspace() and HEADER_OR_FOOTER.search(body[0]):
        body = body[1:]
    if body and not body[-1][0].isspace() and HEADER_OR_FOOTER.search(body[-1]):
        body = body[:-1]
    sections: list[tuple[str, list[str]]] = []
    for line in body:
        text = " ".join(BOX_DRAWING.sub(" ", line).split())
        if not text:
            continue
        if not line[0].isspace():
            sections.append((text, []))
        elif sections:
            sections[-1][1].append(text)
    return sections


def list_pages(
    package: str, files: list[Path], stanzas: list[tuple[list[str], str]], lang: Language | None = None
) -> list[dict]:
    """The pages among ``files`` (not yet rendered; ``lang`` None: an English package); aliases and files
    without a clear section are counted."""
    pages: list[dict] = []
    left_out: Counter[str] = Counter()
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
            source = f"po/{lang.code}/man{section}/{page}.po" if lang else f"man{section}/{page}"
            pages.append(
                {
                    "id": f"{package}:{page}",
                    "page": page,
                    "name": name,
                    "section": section,
                    "package": package,
                    "translated": lang is not None,
                    "file": path,
                    "path": "/usr/" + str(path).split("/usr/", 1)[1],
                    "licence": licence_of(stanzas, source),
                }
            )
    print(f"{package}: {len(pages)} pages; left out: {dict(sorted(left_out.items()))}")
    return pages


def source_header(path: Path) -> str:
    """The comment block a page's source opens with (its copyright and licence header), verbatim."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            if not re.match(r"^['.]\\\"", line):
                break
            out.append(re.sub(r"^['.]\\\" ?", "", line.rstrip("\n")))
    return "\n".join(out).strip()


def rendered(page: dict, lang: Language) -> dict:
    """The page with its ``sections``, its corpus ``text`` (the sections but the credits and the colophon) and
    its ``notice``: who holds the rights and under which licence, which a processed copy has to carry (the
    translated page's credits, TRADUCTION in French: translators and the translation's licence; the English
    source's header: copyright and licence)."""
    sections = parse(render(page["file"]))
    text = "\n\n".join("\n".join([h, *ls]) for h, ls in sections if h.upper() not in {lang.credits, COLOPHON})
    if page["translated"]:
        notice = "\n".join(ln for h, ls in sections if h.upper() == lang.credits for ln in ls)
    else:
        notice = source_header(page["file"])
    return {**page, "sections": sections, "text": text, "notice": notice}


def split_pages(pages: list[dict]) -> tuple[dict[str, list[dict]], list[str]]:
    """Task pages by split (per section: ids sorted, shuffled with SEED, TEST_SHARE to test, VALIDATION_SHARE to
    validation, the rest to train) and the sections left out for having fewer than MIN_PAGES pages in the
    package. The intro pages are in no split: they name their section in words ("La section 1 du manuel")."""
    by_section: dict[str, list[dict]] = {}
    for p in pages:
        by_section.setdefault(p["section"], []).append(p)
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    rare = []
    for section, items in sorted(by_section.items()):
        if len(items) < MIN_PAGES:
            rare.append(f"{section} ({len(items)} pages)")
            continue
        items = sorted((p for p in items if not NOT_IN_TASK.match(p["page"])), key=lambda p: p["id"])
        random.Random(f"{SEED}:{section}").shuffle(items)
        n_test, n_val = round(len(items) * TEST_SHARE), round(len(items) * VALIDATION_SHARE)
        splits["test"] += items[:n_test]
        splits["validation"] += items[n_test : n_test + n_val]
        splits["train"] += items[n_test + n_val :]
    return splits, rare


def in_language(text: str, lang: Language) -> bool:
    """langid.py, between the language and English only: the language of most of the text."""
    return lang.identifier().classify(text)[0] == lang.code


def line_key(line: str) -> str:
    """A line as decontamination compares text: its lowercase ``\\w+`` words."""
    return " ".join(re.findall(r"\w+", line.lower()))


def task_lines(page: dict, lang: Language) -> list[str]:
    """The lines a page's task text is made of: NAME and DESCRIPTION on, no heading, no section of the
    language's ``not_task`` (nor its credits, nor a colophon), every section marker removed (``(8)``, also in
    ``ls(1)``)."""
    left_out = lang.not_task | {lang.credits, COLOPHON}
    lines = [ln for h, ls in page["sections"] if h.upper() not in left_out for ln in ls]
    return [" ".join(SECTION_MARKER.sub("", ln).split()) for ln in lines]


def shared_lines(pages: list[dict], lang: Language) -> set[str]:
    """Keys of the task lines found in two or more French pages: the boilerplate of a family of pages (GNU's
    "Les paramètres obligatoires pour les options de forme longue ..."), the options ``dir`` copies from ``ls``,
    the rows every ISO 8859 table repeats. Left out of every example, they tie no test page to another page."""
    seen = Counter(k for p in pages for k in {line_key(ln) for ln in task_lines(p, lang)} if k)
    return {k for k, n in seen.items() if n > 1}


def task_rows(page: dict, shared: set[str], lang: Language) -> tuple[list[dict], int]:
    """A page's examples, consecutive WINDOW_WORDS-word windows of its text (at most MAX_WINDOWS) that are
    mostly French, and how many windows were not.

    The text is the page's ``task_lines`` but those in ``shared``: window 0 is the NAME line and the start of
    DESCRIPTION, and neither the header nor a marker gives the label away. A last, shorter window is kept from
    MIN_LAST_WORDS words on (a page shorter than that gives its one window). manpages-l10n leaves the strings
    nobody translated in English, and langid reads the character tables of the charset pages (``0xC1 Á LETTRE
    MAJUSCULE ...``) as English too: a window langid does not call French is not an example."""
    text = "\n".join(ln for ln in task_lines(page, lang) if line_key(ln) not in shared)
    pieces = re.findall(r"\S+\s*", text)  # each word with the space or line break after it
    rows, not_french = [], 0
    for i in range(min(MAX_WINDOWS, (len(pieces) + WINDOW_WORDS - 1) // WINDOW_WORDS)):
        chunk = pieces[i * WINDOW_WORDS : (i + 1) * WINDOW_WORDS]
        if i and len(chunk) < MIN_LAST_WORDS:
            break
        window = "".join(chunk).strip()
        if not in_language(window, lang):
            not_french += 1
            continue
        rows.append(
            {
                "id": f"{page['id']}#{i}",
                "text": window,
                "label": page["section"],
                "meta": {"page": page["page"], "window": i, "words": len(chunk), "notice": page["notice"]},
            }
        )
    return rows, not_french


def corpus_row(page: dict, source: str) -> dict:
    """A corpus document. ``licence`` is what Debian's copyright file says; an English page's own header also
    names its licence (``header_licence``), for some pages another one than the file's GPL-2+."""
    meta = {
        "name": page["name"],
        "section": page["section"],
        "package": page["package"],
        "path": page["path"],
        "licence": page["licence"],
        "notice": page["notice"],
    }
    if not page["translated"]:
        tags = re.findall(r"SPDX-License-Identifier:\s*(.+)|%%%LICENSE_START\(([^)]*)\)", page["notice"])
        meta["header_licence"] = " and ".join(a.strip() or b for a, b in tags) or None
    return {"id": page["id"], "text": page["text"], "source": source, "meta": meta}


def english_corpus(pages: dict[str, list[dict]], held_out: set[str], words_wanted: int, lang: Language) -> list[dict]:
    """English pages until they hold ``words_wanted`` words: first the ``manpages`` package (sections 1 and 4-8,
    those of the French pages, and three intro pages), then ``manpages-dev`` (2 and 3), each in sha256(id) order;
    a page whose name.section is a French validation or test page (its English original) is never taken."""
    out, total = [], 0
    for package in EN_PACKAGES:
        for page in sorted(pages[package], key=lambda p: hashlib.sha256(p["id"].encode()).hexdigest()):
            if total >= words_wanted:
                return out
            if f"{page['name']}.{page['section']}" not in held_out:
                out.append(corpus_row(rendered(page, lang), "manpages-en"))
                total += len(out[-1]["text"].split())
    return out


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r["id"])
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8"))
    print(
        f"{path.relative_to(ROOT)}: {len(rows)} rows, {sum(len(r['text'].split()) for r in rows):,} words, "
        f"{path.stat().st_size:,} bytes, sha256 {sha256_of(path)}"
    )


def main(work: Path, lang: Language) -> None:
    print("renderer:", ", ".join(f"{t} {installed_version(t)}" for t in TOOLS))
    l10n_root, l10n_paths = translated_files(work, lang)
    l10n_stanzas = licences(l10n_root / f"usr/share/doc/{lang.package}/copyright")
    l10n_pages = [rendered(p, lang) for p in list_pages(lang.package, l10n_paths, l10n_stanzas, lang)]
    en_paths = english_files()
    en_stanzas = licences(Path("/usr/share/doc/manpages/copyright"))  # manpages-dev ships the same file
    en_pages = {package: list_pages(package, en_paths[package], en_stanzas) for package in EN_PACKAGES}

    splits, rare = split_pages(l10n_pages)
    print("sections left out of the task:", ", ".join(rare) or "none")
    shared = shared_lines(l10n_pages, lang)
    print(f"task lines found in two or more pages, left out: {len(shared)} distinct")
    for split, pages in splits.items():
        made = [task_rows(p, shared, lang) for p in pages]
        rows = [r for page_rows, _ in made for r in page_rows]
        write_jsonl(lang.section_dir / f"{split}.jsonl.gz", rows)
        print(
            f"  {split}: {len(pages)} pages {dict(sorted(Counter(p['section'] for p in pages).items()))}, "
            f"{len({r['meta']['page'] for r in rows})} with an example; "
            f"examples {dict(sorted(Counter(r['label'] for r in rows).items()))}; "
            f"windows 0 {sum(r['meta']['window'] == 0 for r in rows)}; "
            f"windows not {lang.code}, left out {sum(n for _, n in made)}"
        )

    held_out = {p["id"] for s in ("validation", "test") for p in splits[s]}
    l10n_corpus = [corpus_row(p, lang.package) for p in l10n_pages if p["id"] not in held_out]
    write_jsonl(CORPUS_DIR / lang.corpus_file, l10n_corpus)
    print("  sections:", dict(sorted(Counter(r["meta"]["section"] for r in l10n_corpus).items())))
    l10n_words = sum(len(r["text"].split()) for r in l10n_corpus)
    held_names = {f"{p['name']}.{p['section']}" for s in ("validation", "test") for p in splits[s]}
    en_corpus = english_corpus(en_pages, held_names, l10n_words, lang)
    write_jsonl(CORPUS_DIR / lang.english_corpus, en_corpus)
    print(
        "  sections:",
        dict(sorted(Counter(r["meta"]["section"] for r in en_corpus).items())),
        "packages:",
        dict(Counter(r["meta"]["package"] for r in en_corpus)),
        "licences:",
        dict(Counter(r["meta"]["licence"] for r in en_corpus).most_common()),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp"), help="where the .deb is (or is downloaded to)")
    parser.add_argument("--language", choices=sorted(LANGUAGES), default="fr", help="the pages' language")
    args = parser.parse_args()
    main(args.work, LANGUAGES[args.language])
