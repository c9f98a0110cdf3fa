"""Connection secrets never leave the process: one place that knows where a connection string holds
them and removes them from any text.

Where libpq finds a credential (`CREDENTIAL_KEYS`): the user part of a URL
(``postgresql://u:pw@h/db``), a query parameter (``?password=pw``, also ``sslpassword`` and the
others) or a keyword DSN (``host=h password=pw``). libpq percent-decodes URL parameter *names*, so
``?pass%77ord=pw`` and ``?%70assword=pw`` are the password too, and keys are matched here after the
same decoding. Users write passwords unencoded, so a password may itself hold ``/``, ``@`` or ``:``:
here the user part ends at the last ``@`` (libpq stops at the first ``@`` or ``/``, and would read
the rest as a host or a port that its error messages then repeat), and `libpq_url` percent-encodes
such a password so that libpq reads it as the user meant. Everything that is displayed, stored or
reported goes through `redact_url` (a source the user named) or `scrub` (any message); a driver
message is also cleared of every literal value `secret_values` finds.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

HIDDEN = "***"
# Every libpq parameter whose value is a credential: those libpq itself marks as secret ("*" in
# PQconndefaults: password, sslpassword, oauth_client_secret) and the SCRAM keys it marks as debug
# options. tests/core/test_secrets.py checks the list against the installed libpq.
CREDENTIAL_KEYS = frozenset({"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"})
_SCHEME = re.compile(r"(?i)\b(postgres(?:ql)?(?:\+\w+)?://)")
# A URL in a message runs to the next space (a whole argument or source may hold spaces: `redact_url`).
_URL = re.compile(r"(?i)\b(postgres(?:ql)?(?:\+\w+)?://)\S*")
# `key=value` in a query string: key and value up to the next separator.
_PARAM = re.compile(r"([?&;]\s*)([^=&;?#\s]+)(\s*=\s*)([^&#\s]*)")
# `key = value` in a keyword DSN: the value quoted (backslash escapes), or up to the next space.
_KEYWORD = re.compile(r"(?<![\w%])([\w%]+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s'\\]|\\.)+)")


def is_credential_key(key: str) -> bool:
    """Whether libpq reads `key` (percent-decoded, as it decodes URL parameter names) as a credential.
    Case and spaces are ignored, so a key libpq would reject is hidden all the same."""
    return unquote(key).strip().lower() in CREDENTIAL_KEYS


def _user_part(rest: str, strict: bool = False) -> tuple[str, str, str] | None:
    """(user, password, after) of what follows ``scheme://``: the user part ends at the last ``@``
    before the query (unless `strict`, for a password holding ``?``, the last ``@`` at all), the
    password at the first ``:`` of it. None when there is no password."""
    query = rest.find("?")
    head = rest if query < 0 else rest[:query]
    at = head.rfind("@")
    if at < 0 and not strict:
        at = rest.rfind("@")
    if at < 0:
        return None
    user, sep, password = rest[:at].partition(":")
    if not sep:
        return None
    return user, password, rest[at:]


def redact_url(url: str) -> str:
    """A PostgreSQL URL (or keyword DSN, or any command-line argument) as it may be shown: every
    credential replaced by ***. A URL is read whole, spaces included."""
    if _SCHEME.match(url):
        return _hide_keywords(_redact_one_url(url))
    return scrub(url)


def _redact_one_url(url: str) -> str:
    m = _SCHEME.match(url)
    assert m is not None
    scheme, rest = m.group(1), url[m.end() :]
    parts = _user_part(rest)
    if parts is not None:
        user, password, rest = parts
        rest = f"{user}:{HIDDEN}{rest}" if password else f"{user}:{rest}"
    return scheme + _hide_params(rest)


def _hide_params(text: str) -> str:
    return _PARAM.sub(
        lambda p: f"{p.group(1)}{p.group(2)}{p.group(3)}{HIDDEN}" if is_credential_key(p.group(2)) else p.group(0), text
    )


def scrub(text: str) -> str:
    """`text` with every credential of every URL, query string and keyword DSN in it replaced by ***."""
    out, pos = [], 0
    for m in _URL.finditer(text):
        if m.start() < pos:  # inside a URL already redacted (its password held a space)
            continue
        end = _url_end(m, text)
        out += [text[pos : m.start()], _redact_one_url(text[m.start() : end])]
        pos = end
    return _hide_keywords(_hide_params("".join([*out, text[pos:]])))


# The start of a user part whose password is not a port: ``user:`` and then not digits to the path.
_PASSWORD_START = re.compile(r"[^\s:@/?]*:(?!\d*(?:[/?]|$))")


def _url_end(m: re.Match[str], text: str) -> int:
    """Where the URL at `m` ends: at the first space, or, when its password holds a space (a user
    part without ``@`` before it), at the end of the host after the last ``@`` of its line."""
    rest = m.group(0)[len(m.group(1)) :]
    if "@" in rest or not _PASSWORD_START.match(rest):
        return m.end()
    line_end = text.find("\n", m.end())
    line = text[m.end() : len(text) if line_end < 0 else line_end]
    at = line.rfind("@")
    if at < 0:
        return m.end()
    host = re.match(r"\S*", line[at + 1 :])
    return m.end() + at + 1 + (host.end() if host else 0)


def _hide_keywords(text: str) -> str:
    return _KEYWORD.sub(
        lambda k: f"{k.group(1)}{k.group(2)}{HIDDEN}" if is_credential_key(k.group(1)) else k.group(0), text
    )


def libpq_url(url: str) -> str:
    """The URL as libpq should read it: a user-part password percent-encoded (as written, a ``/``, ``@``
    or ``?`` in it would end libpq's user part early), everything else unchanged."""
    m = _SCHEME.match(url)
    parts = _user_part(url[m.end() :], strict=True) if m else None
    if m is None or parts is None:
        return url
    user, password, rest = parts
    return f"{m.group(1)}{user}:{quote(unquote(password), safe='')}{rest}"


def secret_values(conninfo: str) -> set[str]:
    """Every credential `conninfo` holds, as written and decoded: libpq's own reading of it (when it
    parses) and the user-part password as the user meant it. To clear driver messages of them."""
    found: set[str] = set()
    m = _SCHEME.match(conninfo)
    if m:
        parts = _user_part(conninfo[m.end() :])
        if parts is not None and parts[1]:
            found |= {parts[1], unquote(parts[1])}
        for p in _PARAM.finditer(conninfo):
            if is_credential_key(p.group(2)) and p.group(4):
                found |= {p.group(4), unquote(p.group(4))}
    else:
        for k in _KEYWORD.finditer(conninfo):
            if is_credential_key(k.group(1)):
                value = k.group(3)
                found |= {value, re.sub(r"\\(.)", r"\1", value.strip("'"))}
    try:
        from psycopg.conninfo import conninfo_to_dict

        parsed = conninfo_to_dict(libpq_url(conninfo))
    except Exception:  # not a conninfo libpq can read: what was found above is all there is
        parsed = {}
    found |= {str(v) for k, v in parsed.items() if k in CREDENTIAL_KEYS and v}
    return {v for v in found if v}
