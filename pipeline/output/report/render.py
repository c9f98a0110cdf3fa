"""The epoch report model rendered: Markdown and self-contained HTML from the templates in
`reports/`, and the report directory written whole.

The Markdown holds no wall-clock time, so the same warehouse gives the same bytes
(`fingerprint` hashes it without the provenance lines, which name run ids); the
scheduled `run` rewrites a report only when that fingerprint changes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
from pathlib import Path

from pipeline.core.paths import REPORTS_DIR
from pipeline.output.render.markdown import escape, heading_anchor, inline_code, literal, markdown_table
from pipeline.output.render.text import provenance_lines, table_cells
from pipeline.output.report.model import EpochReport


def _environment(html: bool):
    from jinja2 import Environment, FunctionLoader, StrictUndefined

    env = Environment(
        # Read through the paths module, wherever it finds reports/ (a checkout or an installed package).
        loader=FunctionLoader(lambda name: (REPORTS_DIR / name).read_text(encoding="utf-8")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=html,
        keep_trailing_newline=not html,
        finalize=visible_value,
    )
    env.filters["cells"] = table_cells
    env.filters["md"] = escape
    env.filters["literal"] = literal
    env.filters["code"] = inline_code
    env.filters["md_table"] = markdown_table
    env.filters["code_spans"] = _code_spans
    env.filters["breakable"] = _breakable
    env.filters["estimate"] = _estimate
    return env


def visible_value(value):
    """Every value a template prints, with its control characters as escapes (`visible`): a label's ANSI
    sequence or U+FFFF never reaches a page (HTML escaping leaves them as they are)."""
    from markupsafe import Markup

    from pipeline.core.text import visible

    if isinstance(value, Markup):
        return Markup(visible(str(value)))  # an escape adds no HTML-special character
    return visible(value) if isinstance(value, str) else value


def _estimate(cell: str):
    """A cell with its interval ``85.71% (48.69–97.43%)`` as the estimate over its interval (``.ci``), so that
    a column of estimates is as narrow as its numbers; any other cell as it is (escaped)."""
    from markupsafe import Markup
    from markupsafe import escape as html_escape

    value, sep, interval = cell.partition(" (")
    if not sep or not interval.endswith(")") or not re.fullmatch(r"-?[\d.,]+%?", value):
        return cell
    return Markup(f'{html_escape(value)} <span class="ci">({html_escape(interval)}</span>')


def _breakable(name: str):
    """A column name that may wrap after its underscores (``protocol_<wbr>invalid_<wbr>share``), so that a
    wide table's header takes the width of its numbers, not of its longest names."""
    from markupsafe import Markup
    from markupsafe import escape as html_escape

    return Markup(str(html_escape(name)).replace("_", "_<wbr>"))


def _code_spans(text: str):
    """HTML of a line whose `backquoted` parts are commands (``gonka-evidence ingest-logs``): escaped,
    the backquoted parts as <code>, so that no Markdown syntax shows in the HTML report."""
    from markupsafe import Markup
    from markupsafe import escape as html_escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(html_escape(text))))


def section_anchors(report: EpochReport) -> dict[str, str]:
    """Section key → the fragment of its numbered heading on GitHub (``#6-votes-by-build``); the HTML
    report uses the key itself as the id."""
    return {s.key: heading_anchor(f"{i}. {s.heading}") for i, s in enumerate(report.sections, 1)}


def render_report_markdown(report: EpochReport, with_provenance: bool = True) -> str:
    provenance = provenance_lines(report.provenance, quote_command=inline_code, quote_text=literal)
    return (
        _environment(html=False)
        .get_template("epoch_report.md.j2")
        .render(r=report, with_provenance=with_provenance, provenance=provenance, anchors=section_anchors(report))
    )


def render_report_html(report: EpochReport, svgs: dict[str, str]) -> str:
    return (
        _environment(html=True)
        .get_template("epoch_report.html.j2")
        .render(r=report, svgs=svgs, provenance=provenance_lines(report.provenance))
    )


def fingerprint(report: EpochReport) -> str:
    """What the report says, without its provenance lines (run ids change with every ingest)."""
    return hashlib.sha256(render_report_markdown(report, with_provenance=False).encode()).hexdigest()


def write_epoch_report(report: EpochReport, out_dir: Path) -> Path:
    """Write ``out_dir/epoch-N/`` whole: built in a temporary directory, then renamed into place."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / f"epoch-{report.epoch}"
    if final.is_symlink() or (final.exists() and not final.is_dir()):  # not a report of ours: left as it is
        raise FileExistsError(errno.EEXIST, f"{final} exists and is not a report directory", str(final))
    staging = out_dir / f".epoch-{report.epoch}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _write_files(report, staging)
    except BaseException:  # a full disk or Ctrl-C leaves no half-written copy behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = out_dir / f".epoch-{report.epoch}.old-{os.getpid()}"
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _write_files(report: EpochReport, staging: Path) -> None:
    from pipeline.output.render.images import svg_and_png

    (staging / "charts").mkdir(parents=True)
    (staging / "tables").mkdir()
    svgs = {}
    for section in report.sections:
        if section.csv is not None:
            (staging / "tables" / f"{section.key}.csv").write_text(section.csv + "\n", encoding="utf-8")
        if section.chart is not None:
            svg, png = svg_and_png(section.chart)
            (staging / "charts" / f"{section.key}.svg").write_text(svg, encoding="utf-8")
            (staging / "charts" / f"{section.key}.png").write_bytes(png)
            svgs[section.key] = svg
    (staging / "report.md").write_text(render_report_markdown(report), encoding="utf-8")
    (staging / "report.html").write_text(render_report_html(report, svgs), encoding="utf-8")
