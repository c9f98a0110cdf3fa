"""Connection secrets never leave the process: one place that removes them from any text.

A PostgreSQL source may carry a password in the user part of its URL (``postgresql://u:pw@h/db``),
in its query string (``?password=pw``, also ``sslpassword``) or in a keyword DSN
(``host=h password=pw``). Users write passwords unencoded, so a password may itself hold ``/``,
``@`` or ``:``: the user part ends at the last ``@`` before the host. Everything that is displayed,
stored or reported goes through `redact_url` (a source the user named) or `scrub` (any message).
"""

from __future__ import annotations

import re

HIDDEN = "***"
_SECRET_KEYS = r"(?:ssl)?password"
# `password=value` in a query string or a keyword DSN (value quoted, or up to the next separator)
_KEYWORD = re.compile(rf"(?i)(\b{_SECRET_KEYS}\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&;]+)")
# scheme://user:password@host… — the password runs to the last '@' before the host part
_URL = re.compile(r"(?i)\b((?:postgres|postgresql)(?:\+\w+)?://)([^\s:@/?#]*):([^\s]*)@(?=[^\s@]*(?:\s|$))")


def redact_url(url: str) -> str:
    """A PostgreSQL URL (or keyword DSN) as it may be shown: every password replaced by ***."""
    return scrub(url)


def scrub(text: str) -> str:
    """`text` with every URL password and every ``password=`` value replaced by ***."""
    text = _URL.sub(lambda m: f"{m.group(1)}{m.group(2)}:{HIDDEN}@", text)
    return _KEYWORD.sub(lambda m: f"{m.group(1)}{HIDDEN}", text)


def password_of(url: str) -> str | None:
    """The password a URL or keyword DSN carries (user part first), to scrub it from driver messages."""
    m = _URL.search(url)
    if m:
        return m.group(3)
    k = _KEYWORD.search(url)
    return k.group(2).strip("'") if k else None
