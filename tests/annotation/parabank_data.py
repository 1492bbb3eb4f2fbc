"""A made-up campaign in ParaBank's release format (the one of ../shared/tools/contract-check), for tests."""

from pathlib import Path

REF_HEADER = "ref_id\tref_sent\tref_len\tczeng_s"
CAND_HEADER = "worker_id_anon\tref_id\tref_len\tsys_id\tcandidate\tNLL\thuman_score\tgm"

REFS = [
    "1\tIt is fine now.\t5\t1.0",
    "2\tHe left very early.\t5\t1.0",
]
# System 28's output for ref 1 is the reference itself: it merges with the attention copy (sys 0).
CANDS = [
    "1\t1\t5\t0\tIt is fine now.\t0.1\t100\t2",
    "2\t1\t5\t28\tIt is fine now.\t0.1\t98\t2",
    "1\t1\t5\t17 21\tIt is okay now.\t0.5\t80\t2",
    "2\t1\t5\t17 21\tIt is okay now.\t0.5\t70\t1",
    "1\t2\t5\t28 17\tHe went away early.\t0.4\t60\t2",
    "2\t2\t5\t21\tHe left very soon.\t0.6\t\t0",
    "3\t2\t5\t21\tHe left very soon.\t0.6\t40\t2",
]


def write_parabank(directory: Path, refs=None, cands=None, ref_header=REF_HEADER, cand_header=CAND_HEADER):
    directory = Path(directory)
    ref_path, cand_path = directory / "ref.tsv", directory / "cand.tsv"
    ref_path.write_text("\n".join([ref_header, *(REFS if refs is None else refs)]) + "\n", encoding="utf-8")
    cand_path.write_text("\n".join([cand_header, *(CANDS if cands is None else cands)]) + "\n", encoding="utf-8")
    return ref_path, cand_path


def import_contract(directory: Path, campaign="contract", refs=None, cands=None):
    from annotation.campaigns.importers import import_parabank

    ref_path, cand_path = write_parabank(directory, refs, cands)
    return import_parabank(campaign_name=campaign, references_path=ref_path, candidates_path=cand_path)
