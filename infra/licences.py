"""Licences as SPDX identifiers, and whether a release may carry a licence given the terms of the corpus it was
made from: the one rule of ``import_corpus --license`` (``generation.corpus.corpora``) and ``export_release --license``
(``scoring.releases.checks``).

Identifier: an SPDX id of ``SPDX_LICENSES`` (in any case; written in SPDX's own), ``LicenseRef-NAME`` for terms of
one's own, ``NOASSERTION`` (also typed ``unknown``, the Hugging Face hub's word) when none is stated.

Conflict (``license_conflict``): paraphrases of a corpus's sentences and their scores are adapted material of
the corpus, so a release may not grant more than the corpus's terms allow:

- no licence stated for the release (``NOASSERTION``) grants nothing: always allowed; so is the corpus's own
  licence, and anything when the corpus's licence is unknown (``NOASSERTION``: the exporter answers for it);
- **NoDerivatives** (``-ND-``): no other licence (a paraphrase is an adaptation);
- **NonCommercial** (``-NC-``): only another NonCommercial licence;
- **ShareAlike** (``-SA-``, ODbL, CDLA-Sharing, the GPL family): only the same licence (a CC BY-SA or BY-NC-SA
  release of the same or a later version, as Creative Commons allows);
- terms of one's own (``LicenseRef-``): only the same terms, since nothing here can read them;
- permissive licences (CC BY, CC0, ODC-By, PDDL, MIT, Apache-2.0, ...): any licence (credit the corpus: the
  card names it).
"""

from __future__ import annotations

import re

NO_LICENSE = "NOASSERTION"
# SPDX identifiers a dataset or the data behind it is commonly released under -> the Hugging Face hub's id
SPDX_LICENSES = {
    "CC-BY-4.0": "cc-by-4.0",
    "CC-BY-SA-4.0": "cc-by-sa-4.0",
    "CC-BY-NC-4.0": "cc-by-nc-4.0",
    "CC-BY-NC-SA-4.0": "cc-by-nc-sa-4.0",
    "CC-BY-ND-4.0": "cc-by-nd-4.0",
    "CC-BY-NC-ND-4.0": "cc-by-nc-nd-4.0",
    "CC-BY-3.0": "cc-by-3.0",
    "CC-BY-SA-3.0": "cc-by-sa-3.0",
    "CC-BY-NC-3.0": "cc-by-nc-3.0",
    "CC-BY-NC-SA-3.0": "cc-by-nc-sa-3.0",
    "CC-BY-NC-ND-3.0": "cc-by-nc-nd-3.0",
    "CC-BY-2.0": "cc-by-2.0",
    "CC-BY-2.5": "cc-by-2.5",
    "CC-BY-NC-2.0": "cc-by-nc-2.0",
    "CC-BY-NC-SA-2.0": "cc-by-nc-sa-2.0",
    "CC0-1.0": "cc0-1.0",
    "ODC-By-1.0": "odc-by",
    "ODbL-1.0": "odbl",
    "PDDL-1.0": "pddl",
    "CDLA-Permissive-1.0": "cdla-permissive-1.0",
    "CDLA-Permissive-2.0": "cdla-permissive-2.0",
    "CDLA-Sharing-1.0": "cdla-sharing-1.0",
    "Apache-2.0": "apache-2.0",
    "MIT": "mit",
    "BSD-2-Clause": "bsd-2-clause",
    "BSD-3-Clause": "bsd-3-clause",
    "ISC": "isc",
    "MPL-2.0": "mpl-2.0",
    "EPL-2.0": "epl-2.0",
    "GPL-2.0-only": "gpl-2.0",
    "GPL-2.0-or-later": "gpl-2.0",
    "GPL-3.0-only": "gpl-3.0",
    "GPL-3.0-or-later": "gpl-3.0",
    "LGPL-2.1-only": "lgpl-2.1",
    "LGPL-3.0-only": "lgpl-3.0",
    "AGPL-3.0-only": "agpl-3.0",
    "AGPL-3.0-or-later": "agpl-3.0",
    "Artistic-2.0": "artistic-2.0",
    "BSL-1.0": "bsl-1.0",
    "OFL-1.1": "ofl-1.1",
    "Unlicense": "unlicense",
    "WTFPL": "wtfpl",
    "Zlib": "zlib",
    "etalab-2.0": "etalab-2.0",
    NO_LICENSE: "unknown",
}
_BY_LOWER = {spdx.lower(): spdx for spdx in SPDX_LICENSES}
# hub ids that are not an SPDX id in another case: the SPDX id they stand for
_BY_LOWER.update(
    {
        "odc-by": "ODC-By-1.0",
        "odbl": "ODbL-1.0",
        "pddl": "PDDL-1.0",
        "gpl-2.0": "GPL-2.0-only",
        "gpl-3.0": "GPL-3.0-only",
        "lgpl-2.1": "LGPL-2.1-only",
        "lgpl-3.0": "LGPL-3.0-only",
        "agpl-3.0": "AGPL-3.0-only",
        "unknown": NO_LICENSE,  # the hub's word for it, which the tutorial's admin form keeps
    }
)
_LICENSE_REF = re.compile(r"LicenseRef-[A-Za-z0-9.-]{1,64}")


def license_check(value: str | None) -> str:
    """The SPDX id of ``value`` in SPDX's case (``NO_LICENSE`` when none is given), else a ValueError that says
    what to give instead."""
    if value is None or not str(value).strip():
        return NO_LICENSE
    text = str(value).strip()
    if _LICENSE_REF.fullmatch(text):
        return text
    found = _BY_LOWER.get(text.lower())
    if found is None:
        hint = f" ({NO_LICENSE} states that none is given)" if text.lower() == "none" else ""
        hint = " (LicenseRef-NAME names terms of your own)" if text.lower() == "other" else hint
        raise ValueError(
            f"licence {text!r} is not an SPDX id this release knows{hint}: give e.g. CC-BY-4.0, CC-BY-SA-4.0, "
            f"CC-BY-NC-4.0, CC0-1.0, ODC-By-1.0, Apache-2.0, MIT, LicenseRef-NAME or {NO_LICENSE}"
        )
    return found


_SHARE_ALIKE_FAMILIES = ("ODbL-", "CDLA-Sharing-", "GPL-", "LGPL-", "AGPL-", "EPL-", "MPL-")
_CC = re.compile(r"CC-BY(?P<terms>(?:-NC)?(?:-SA|-ND)?)-(?P<version>\d\.\d)")


def license_conflict(corpus: str, release: str) -> str | None:
    """Why a release under ``release`` would grant more than the corpus's licence ``corpus`` allows (both SPDX ids,
    ``license_check``'s), or None when it may carry it (rules in the module docstring)."""
    if release == NO_LICENSE or corpus == NO_LICENSE or release == corpus:
        return None
    if corpus.startswith("LicenseRef-"):
        return (
            f"the corpus is under its own terms ({corpus}), which Paraforge cannot read: a release of it may carry "
            f"only the same terms (--license {corpus}) or none ({NO_LICENSE}, typed unknown)"
        )
    source, target = _CC.fullmatch(corpus), _CC.fullmatch(release)
    terms = source.group("terms") if source else ""
    if "-ND" in terms:
        return f"the corpus's licence {corpus} allows no derivatives, and paraphrases of its sentences are derivatives"
    if "-NC" in terms and not (target and "-NC" in target.group("terms")) and not release.startswith("LicenseRef-"):
        return (
            f"the corpus's licence {corpus} is NonCommercial: a release of it may not allow commercial use as "
            f"{release} does; give a NonCommercial licence (e.g. {corpus})"
        )
    if "-SA" in terms:
        same = target and target.group("terms") == terms and target.group("version") >= source.group("version")
        if not same:
            return (
                f"the corpus's licence {corpus} is ShareAlike: adaptations of it must be released under the same "
                f"licence ({corpus} or a later version), not {release}"
            )
        return None
    if corpus.startswith(_SHARE_ALIKE_FAMILIES):
        return f"the corpus's licence {corpus} is share-alike (copyleft): a release of it must carry {corpus} too"
    return None
