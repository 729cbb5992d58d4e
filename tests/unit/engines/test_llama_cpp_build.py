"""The batched llama-server build: its CMake script, run by the real cmake and compiler on a small
tree shaped like llama.cpp's (a library under common/ whose two files clash when compiled in one
batch, and a llama-server target), and the file-by-file build it falls back to."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stackbook.engines.install import InstallFailed
from stackbook.engines.llama_cpp_build import COMPILED_ALONE, build_server, compiled_alone_script

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("c++") is None,
                                reason="needs cmake and a C++ compiler (the llama-server build's own prerequisites)")

# Both files define the same file-local helper: fine one file at a time, a redefinition in one batch.
CLASH = "static int twice(int x) {{ return 2 * x; }}\nint {name}(int x) {{ return twice(x); }}\n"


MAIN = "int a(int); int json(int); int main() { return a(1) + json(1) - 4; }\n"


def small_tree(root: Path, main: str = MAIN) -> Path:
    (root / "common").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(small CXX)\n"
        "set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)\nadd_subdirectory(common)\n"
        "add_executable(llama-server main.cpp)\ntarget_link_libraries(llama-server common)\n")
    (root / "common" / "CMakeLists.txt").write_text("add_library(common STATIC a.cpp json.cpp)\n")
    (root / "common" / "a.cpp").write_text(CLASH.format(name="a"))
    (root / "common" / "json.cpp").write_text(CLASH.format(name="json"))
    (root / "main.cpp").write_text(main)
    return root


def test_the_script_keeps_each_named_source_out_of_the_batches_in_its_own_folder():
    script = compiled_alone_script(("common/json.cpp", "tools/mtmd/mtmd-helper.cpp"))
    lines = script.splitlines()
    assert len(lines) == 2
    assert "${CMAKE_SOURCE_DIR}/common/json.cpp DIRECTORY ${CMAKE_SOURCE_DIR}/common PROPERTIES" in lines[0]
    assert "DIRECTORY ${CMAKE_SOURCE_DIR}/tools/mtmd PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON" in lines[1]
    assert all(line.startswith("cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL") for line in lines)
    assert "common/json.cpp" in COMPILED_ALONE


def test_a_batched_build_compiles_the_named_sources_alone(tmp_path):
    src = small_tree(tmp_path / "src")
    binary = build_server(src, tmp_path / "work", ["-DCMAKE_BUILD_TYPE=Release"], tmp_path,
                          alone=("common/json.cpp",))
    assert binary == tmp_path / "work" / "batched" / "bin" / "llama-server"
    assert subprocess.run([str(binary)]).returncode == 0
    assert "unity" in (tmp_path / "llama-batched-build.log").read_text().lower()
    assert not (tmp_path / "work" / "files").exists()


def test_a_batched_build_that_fails_is_built_again_file_by_file(tmp_path, capsys):
    src = small_tree(tmp_path / "src")
    binary = build_server(src, tmp_path / "work", ["-DCMAKE_BUILD_TYPE=Release"], tmp_path, alone=())
    assert binary == tmp_path / "work" / "files" / "bin" / "llama-server"
    assert subprocess.run([str(binary)]).returncode == 0
    assert "redefinition" in (tmp_path / "llama-batched-build.log").read_text()
    assert "the batched build failed (log: " in capsys.readouterr().err


def test_a_build_that_fails_both_ways_shows_the_end_of_its_log(tmp_path, capsys):
    src = small_tree(tmp_path / "src", main="int main() { return undeclared_name; }\n")
    with pytest.raises(InstallFailed):
        build_server(src, tmp_path / "work", [], tmp_path, alone=("common/json.cpp",))
    assert "undeclared_name" in capsys.readouterr().out
