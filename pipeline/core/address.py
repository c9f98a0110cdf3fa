"""Gonka account addresses: bech32 (BIP-173) with the human-readable part ``gonka``.

A host's address is ``gonka1`` + 32 data characters (its 20-byte account id in 5-bit groups) + a
6-character checksum. The checksum is the BIP-173 polymod, written here from the specification
(https://github.com/bitcoin/bips/blob/master/bip-0173.mediawiki) rather than taken as a dependency.
"""

from __future__ import annotations

HRP = "gonka"
CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _polymod(values: list[int]) -> int:
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i, gen in enumerate(_GENERATOR):
            check ^= gen if (top >> i) & 1 else 0
    return check


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def encode(data: list[int], hrp: str = HRP) -> str:
    """The bech32 string of 5-bit ``data`` values under ``hrp``, checksum appended."""
    polymod = _polymod([*_hrp_expand(hrp), *data, 0, 0, 0, 0, 0, 0]) ^ 1
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(CHARSET[d] for d in [*data, *checksum])


def address_problem(text: str, hrp: str = HRP) -> str | None:
    """Why ``text`` is not a well-formed ``gonka1…`` account address, or None when it is one."""
    if text != text.lower() and text != text.upper():
        return "mixes upper and lower case"
    text = text.lower()
    if not text.startswith(hrp + "1"):
        return f"does not start with {hrp}1"
    data = text[len(hrp) + 1 :]
    if bad := sorted({c for c in data if c not in CHARSET}):
        return f"has characters outside the bech32 alphabet ({''.join(bad)})"
    if not 6 < len(data) <= 90 - len(hrp) - 1:  # BIP-173 bounds; a host's account id gives 38
        return f"has {len(data)} characters after {hrp}1"
    if _polymod([*_hrp_expand(hrp), *(CHARSET.index(c) for c in data)]) != 1:
        return "fails its bech32 checksum (a typo?)"
    return None


def malformed(option: str, text: str, hrp: str = HRP) -> str | None:
    """The one-line refusal of ``text`` given as ``option`` when it is no ``gonka1…`` address, else None."""
    problem = address_problem(text, hrp)
    return None if problem is None else f"{option} {text!r} is not a {hrp}1… address: it {problem}"


def sample_address(readable: str) -> str:
    """A well-formed made-up address that reads as ``readable`` (bech32 characters, padded with 0s):
    for samples and tests, e.g. ``sample_address("l0gh0st")`` is ``gonka1l0gh0st000…`` + its checksum."""
    return encode([CHARSET.index(c) for c in readable.ljust(32, "0")])
