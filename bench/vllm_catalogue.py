"""Regenerate or check the vLLM death / OOM catalogue (pipeline/sources/logs/vllm_catalogue.toml) from vLLM's source.

Not run at run time: the reader only loads the TOML. This script reads a bare git mirror of vllm-project/vllm
(or of an accelerator fork such as vllm-project/vllm-ascend) and, for every catalogue entry whose `origin` is that
repository, finds the releases and files where its text is a message in the source: a string constant (adjacent
literals joined, f-string fields and %-placeholders written `{}`) of a `.py` file outside the tests. It rewrites
`since`, `until` and `files` of those entries (`--check`: exits 1 instead when they differ).

Releases: the mirror's `vX.Y.Z` tags when it has them; otherwise (a mirror without tags, e.g. a fork's snapshot)
the upstream tip's first-parent commit on each release's date (`RELEASE_DATES`; releases are cut from main with
cherry-picks, so a text present on main that day is taken as present in the release).

    python bench/vllm_catalogue.py --mirror /work/.mirror/jinhuang12+vllm/repo --tip 2a69949bd --origin vllm
    python bench/vllm_catalogue.py --mirror /work/.mirror/vllm-project+vllm-ascend/repo --origin vllm-ascend
    python bench/vllm_catalogue.py ... --check       # exit 1 when the catalogue is not what the mirror says
    python bench/vllm_catalogue.py ... --discover    # messages of the newest release that look like deaths / OOMs
                                                     # and that no entry covers (to review by hand)
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

CATALOGUE = Path(__file__).parents[1] / "pipeline" / "sources" / "logs" / "vllm_catalogue.toml"
PACKAGES = {"vllm": "vllm/", "vllm-ascend": "vllm_ascend/"}
# vLLM releases from 0.4 on, with the day each was published (for mirrors without tags)
RELEASE_DATES = {
    "0.4.0": "2024-03-30",
    "0.4.1": "2024-04-24",
    "0.4.2": "2024-05-05",
    "0.4.3": "2024-06-01",
    "0.5.0": "2024-06-11",
    "0.5.1": "2024-07-05",
    "0.5.2": "2024-07-15",
    "0.5.3": "2024-07-23",
    "0.5.4": "2024-08-05",
    "0.5.5": "2024-08-23",
    "0.6.0": "2024-09-04",
    "0.6.1": "2024-09-11",
    "0.6.2": "2024-09-25",
    "0.6.3": "2024-10-14",
    "0.6.4": "2024-11-15",
    "0.6.5": "2024-12-17",
    "0.6.6": "2024-12-27",
    "0.7.0": "2025-01-27",
    "0.7.1": "2025-02-01",
    "0.7.2": "2025-02-06",
    "0.7.3": "2025-02-20",
    "0.8.0": "2025-03-18",
    "0.8.1": "2025-03-19",
    "0.8.2": "2025-03-24",
    "0.8.3": "2025-04-06",
    "0.8.4": "2025-04-14",
    "0.8.5": "2025-04-28",
    "0.9.0": "2025-05-15",
    "0.9.1": "2025-06-10",
    "0.9.2": "2025-07-08",
    "0.10.0": "2025-07-24",
    "0.10.1": "2025-08-18",
    "0.10.2": "2025-09-13",
    "0.11.0": "2025-10-02",
    "0.11.1": "2025-11-18",
    "0.11.2": "2025-11-20",
    "0.12.0": "2025-12-03",
    "0.13.0": "2025-12-18",
    "0.14.0": "2026-01-20",
    "0.15.0": "2026-01-29",
    "0.16.0": "2026-02-25",
    "0.17.0": "2026-03-07",
    "0.18.0": "2026-03-20",
    "0.19.0": "2026-04-02",
}
PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifrx]|\{[^{}]*\}")
# what --discover lists: messages of logging / raise calls that look like an engine's end or an OOM
LOOKS_FATAL = re.compile(
    r"dead|died|failed to start|terminat|out of memory|outofmemory|\boom\b|kv cache|cache blocks|fatal", re.I
)


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def releases(mirror: Path, tip: str | None) -> list[tuple[str, str]]:
    """(version, commit) of each release from 0.4, oldest first."""
    tags = [t for t in git(mirror, "tag").split() if re.fullmatch(r"v\d+\.\d+\.\d+(?:\.post\d+)?", t)]
    if tags:
        found = [(t[1:], t) for t in tags if vkey(t) >= (0, 4, 0)]
        return sorted(found, key=lambda vt: vkey(vt[0]))
    if tip is None:
        raise SystemExit("the mirror has no release tags: give --tip (the upstream commit to date releases on)")
    out = []
    for version, day in RELEASE_DATES.items():
        commit = git(mirror, "rev-list", "-1", "--first-parent", f"--before={day} 23:59:59", tip).strip()
        if commit:
            out.append((version, commit))
    return out


def normalise(text: str) -> str:
    return PLACEHOLDER.sub("{}", text)


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return left + right if left is not None and right is not None else None
    return None


def messages(source: str) -> list[str]:
    """Every string of a module (normalised), joined where literals are joined."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is not None:
            out.append(normalise(text))
    return out


def call_messages(source: str) -> list[tuple[int, str, str]]:
    """(line, call, message) of logger.critical/fatal/error/exception calls and raised exceptions."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        call = None
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call, how = node.exc, "raise " + ast.unparse(node.exc.func)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("critical", "fatal", "error", "exception")
        ):
            call, how = node, "logger." + node.func.attr
        if call is not None and call.args:
            text = _text(call.args[0])
            if text:
                out.append((node.lineno, how, normalise(text)))
    return out


def literal(text: str) -> str:
    """The longest word of a catalogue text (what git grep looks for: a message may be split over several
    adjacent literals, so only a word is sure to be on one line)."""
    return max(text.replace("{}", " ").split(), key=len)


def scan(mirror: Path, origin: str, tip: str | None, entries: list[dict]) -> dict[str, dict]:
    """text → {since, until, files} over the mirror's releases."""
    pkg = PACKAGES[origin]
    mine = [e for e in entries if e["origin"] == origin]
    found: dict[str, dict] = {}
    for version, ref in releases(mirror, tip):
        args = ["grep", "-l", "-F"]
        for e in mine:
            args += ["-e", literal(e["text"])]
        try:
            hits = git(mirror, *args, ref, "--", f"{pkg}*.py").split()
        except subprocess.CalledProcessError:  # nothing found in this release
            continue
        for hit in hits:
            path = hit.split(":", 1)[1]
            if re.search(r"(^|/)tests?/|(^|/)test_", path):
                continue
            texts = messages(git(mirror, "show", hit))
            for e in mine:
                if any(e["text"] in t for t in texts):
                    f = found.setdefault(e["text"], {"since": version, "until": version, "files": []})
                    f["until"] = version
                    if path not in f["files"]:
                        f["files"].append(path)
    return found


def render(entries: list[dict], header: str) -> str:
    out = [header.rstrip("\n"), ""]
    for e in entries:
        out.append("[[entry]]")
        for key in ("text", "kind", "event", "origin", "since", "until", "files", "source", "note"):
            if key not in e:
                continue
            value = e[key]
            if isinstance(value, list):
                out.append(f"{key} = [{', '.join(_quote(v) for v in value)}]")
            else:
                out.append(f"{key} = {_quote(value)}")
        out.append("")
    return "\n".join(out)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, required=True, help="a bare git mirror of vLLM or of vllm-ascend")
    ap.add_argument("--origin", choices=sorted(PACKAGES), default="vllm")
    ap.add_argument("--tip", help="upstream commit to date releases on (mirrors without tags)")
    ap.add_argument("--catalogue", type=Path, default=CATALOGUE)
    ap.add_argument("--check", action="store_true", help="exit 1 when the catalogue differs from the mirror")
    ap.add_argument("--discover", action="store_true", help="list uncovered fatal-looking messages of the newest")
    args = ap.parse_args()
    raw = args.catalogue.read_text()
    header = raw.split("[[entry]]", 1)[0]
    entries = tomllib.loads(raw)["entry"]
    if args.discover:
        covered = [e["text"] for e in entries]
        seen: set[str] = set()
        grep = "dead|died|failed to start|terminat|out of memory|OutOfMemory|OOM|KV cache|cache blocks|fatal"
        for version, ref in releases(args.mirror, args.tip):
            try:
                hits = git(args.mirror, "grep", "-l", "-i", "-E", grep, ref, "--", f"{PACKAGES[args.origin]}*.py")
            except subprocess.CalledProcessError:
                continue
            for hit in hits.split():
                if re.search(r"(^|/)tests?/|(^|/)test_", hit.split(":", 1)[1]):
                    continue
                for line, how, text in call_messages(git(args.mirror, "show", hit)):
                    if LOOKS_FATAL.search(text) and not any(c in text for c in covered) and text not in seen:
                        seen.add(text)
                        print(f"{version} {hit.split(':', 1)[1]}:{line} {how}: {text}")
        return 0
    found = scan(args.mirror, args.origin, args.tip, entries)
    missing = []
    for e in entries:
        if e["origin"] != args.origin:
            continue
        f = found.get(e["text"])
        if f is None:
            if "note" not in e:  # a text read in newer source than the mirror's (its note) stays as it is
                missing.append(e["text"])
            continue
        e.update(f)
        e.pop("note", None)  # its releases are known now
    if missing:
        print("not found in any release of the mirror:", *missing, sep="\n  ", file=sys.stderr)
        return 1
    text = render(entries, header)
    if args.check:
        if text != raw:
            print(f"{args.catalogue} differs from what {args.mirror} says (run without --check)", file=sys.stderr)
            return 1
        return 0
    args.catalogue.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
