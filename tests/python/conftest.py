"""Session fixtures: real code objects compiled once per run (cached across runs)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hip_objects import ARCHES, DATA, CompileJob, compile_many

#: What ``scripts/test.sh --quick`` leaves out (``-m "not heavy"``): modules (by name) and
#: single tests (``module::function``, every parameter) that pack with real compiles many
#: times, build with CMake, or run kill and race trials, fuzzing and mutation; and every
#: test using the ``installed_prefix`` fixture (a full build). What is left still packs,
#: validates and reads shards, a few compiles at most each.
HEAVY = frozenset({
    "test_cache_damage", "test_cache_hostile", "test_cmake_api", "test_cmake_superbuild",
    "test_concurrency", "test_corpus", "test_escapes", "test_fuzz", "test_hostile",
    "test_kill", "test_mutation", "test_pack", "test_pack_kinds", "test_packaging",
    "test_runtime_check",
    "test_cache_admin", "test_cpp_consumer",  # real packs; a full CMake build of the example
    "test_dvc::test_validate_warns_and_pack_fails_only_the_arches_missing_objects",
    "test_hostile_generate_dvc::test_the_advice_after_verify_repairs_a_damaged_output",
    "test_migrate::test_a_legacy_example_tree_migrates_to_one_that_packs_and_loads",
    # Compiles the example for three arches no other quick test packs.
    "test_golden_pack::test_the_example_packs_byte_for_byte_as_before_on_every_other_arch",
    # Two servers, a dozen compiles; the dead-server and 5xx tests stay in --quick.
    "test_remote_cache::test_a_second_machine_packs_with_no_compile",
    "test_remote_cache::test_a_changed_header_misses_and_adds_an_entry",
    "test_remote_cache::test_read_mode_uploads_nothing",
    "test_remote_cache::test_a_damaged_object_is_compiled_here",
    "test_remote_cache::test_a_damaged_action_entry_is_ignored",
    # Each packs (compiles) against a hostile server; redaction, usage and dvc stay quick.
    *(f"test_remote_hostile::test_{name}" for name in (
        "no_channel_prints_a_credential", "a_server_cannot_make_the_client_open_a_file",
        "a_control_character_in_an_object_name_is_an_invalid_entry",
        "an_infinite_compile_time_never_reaches_the_report",
        "cache_stats_and_verify_survive_a_hostile_listing",
        "a_dripping_server_costs_one_deadline", "a_flooding_server_is_read_only_up_to_the_limit",
        "a_redis_value_larger_than_its_entry_says_is_not_read")),
    # Packs twice or more per test with real compiles, some made to take seconds.
    "test_early_compiles", "test_pack_edit_overlap",
    # Starts zsh's completion system (7 s); bash's stays quick.
    "test_completion::test_zsh_completes_a_subcommand_and_a_flag",
    # Starts PostgreSQL, BuildGrid and two workers (about 5-12 s) and compiles on them.
    "test_remote_exec_fixture",
    # The same farm, and packs of a small tree through it (two units, two arches).
    "test_remote_exec_pack",
    # A resident server started per test, packs (with compiles) handed to it (17 s).
    "test_resident",
    # Each waits out a timeout by design (2-3 s); the dead-server and 5xx tests stay quick.
    "test_remote_cache::test_a_silent_server_costs_one_timeout",
    "test_remote_hostile::test_dvc_pull_stops_at_its_timeout",
    # Compiles the example for gfx908, which no other quick test packs (5 s); verify's
    # other tests stay quick on gfx90a.
    "test_verify::test_a_fresh_shard_of_the_generated_engine_verifies",
    # Packs a slotted engine with real compiles; slots' validate and tool tests stay quick.
    "test_init::test_init_slots_writes_a_slotted_engine_that_validates_and_packs",
    # Compile for generic targets and feature variants with clang-19 (1-3.5 s each); the
    # target table's own tests and the other packs of targets stay quick.
    "test_targets::test_prebuilt_generic_object_packs_into_its_members_shards_only",
    "test_targets::test_hip_kernel_compiled_once_for_its_generic_family",
    "test_targets::test_generic_build_on_an_arch_in_no_family_builds_for_the_arch",
    "test_targets::test_feature_variants_share_one_shard_and_the_runtime_picks_by_target_id",
    # The same (1.2-3.6 s each), which kept --quick over its two minutes.
    "test_targets::test_prebuilt_generic_object_for_an_arch_outside_its_family_fails_that_arch",
    "test_targets::test_a_target_the_compiler_cannot_build_fails_that_arch",
    "test_targets::test_without_an_any_variant_a_device_of_unknown_setting_is_refused",
    "test_slots_pack::test_a_slotted_engine_of_generic_objects_packs_loads_and_picks",
})


def _reset_stop_signals() -> None:
    """SIGINT and SIGHUP as a terminal gives them, whatever started the suite: a
    background job of a script starts with SIGINT ignored and `nohup` ignores SIGHUP,
    and children inherit an ignored signal. The packer keeps a stop signal it found
    ignored (so `nohup ukdpack pack` outlives its terminal): the kill and signal tests
    need theirs delivered."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_configure(config: pytest.Config) -> None:
    _reset_stop_signals()
    config.addinivalue_line("markers", "heavy: compile-heavy or long-running module; "
                                       "scripts/test.sh --quick leaves it out")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = Path(str(item.fspath)).stem
        function = getattr(item, "originalname", item.name)
        if (module in HEAVY or f"{module}::{function}" in HEAVY
                or "installed_prefix" in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.heavy)


SIGNATURES = DATA / "signatures.hip"


@pytest.fixture(scope="session", autouse=True)
def _temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every process a test starts gets a temporary folder of this session's (TMPDIR):
    a pack a test kills cannot remove its compiles' folders (``ukdpack-cc-*``), which
    would otherwise pile up in the system's /tmp run after run. pytest removes the
    folders of old sessions."""
    folder = tmp_path_factory.mktemp("tmp")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before


@pytest.fixture(scope="session")
def signature_objects() -> dict[str, bytes]:
    """hipcc output of data/signatures.hip: one per arch of ARCHES, plus ``names``
    (gfx90a with -fhip-kernel-arg-name) and ``xnack`` (gfx90a:xnack+)."""
    jobs = {a: CompileJob(SIGNATURES, a) for a in ARCHES}
    jobs["names"] = CompileJob(SIGNATURES, "gfx90a", flags=("-fhip-kernel-arg-name",))
    jobs["xnack"] = CompileJob(SIGNATURES, "gfx90a:xnack+")
    paths = compile_many(jobs.values())
    return {name: p.read_bytes() for name, p in zip(jobs, paths, strict=True)}


@pytest.fixture(scope="session")
def installed_prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`cmake --install` of a plain (non-pip) build of the checkout: one full build
    shared by every test of the installed layout (it is the slowest step of the suite)."""
    repo = Path(__file__).resolve().parents[2]
    base = tmp_path_factory.mktemp("install")
    build, prefix = base / "build", base / "prefix"
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    for args in (["cmake", "-S", str(repo), "-B", str(build), "-G", "Ninja",
                  "-DCMAKE_BUILD_TYPE=Release", "-DUKDPACK_BUILD_TESTS=OFF",
                  f"-DPython3_EXECUTABLE={sys.executable}", *launcher],
                 ["cmake", "--build", str(build), "-j2"],
                 ["cmake", "--install", str(build), "--prefix", str(prefix)]):
        r = subprocess.run(args, cwd=base, capture_output=True, text=True, env=env, check=False)
        if r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return prefix
