# -*- Python -*-
# lit configuration for the dsc IR tests (test/Dialect, test/Transforms,
# test/Translate, test/Integration).

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "DSC"
# The internal shell: it provides `not`, which Debian does not ship.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".yml", ".yaml", ".json", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Runtime", "Analysis", "Unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dsc_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%dsc_src_root", config.dsc_src_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(
    ("%dsc_translate_path", os.path.join(config.dsc_tools_dir, "dsc-translate")))
config.substitutions.append(
    ("%dsc_run_path", os.path.join(config.dsc_tools_dir, "dsc-run")))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

if config.dsc_have_cuda:
    config.available_features.add("cuda")
    # A usable GPU too: the tests that run kernels need one (the build
    # machines have none; scripts/gpu-check.sh runs them on a lent GPU).
    import subprocess
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                text=True, timeout=30)
        if listed.returncode == 0 and "GPU" in listed.stdout:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.SubprocessError):
        pass
# numpy for the CUDA kernels' float64 mirrors (scripts/setup.sh installs it).
import subprocess as _subprocess
if _subprocess.run([config.python_executable, "-c", "import numpy"],
                   capture_output=True).returncode == 0:
    config.available_features.add("numpy")
# coreutils' timeout, so that a test of something that used to hang fails
# its checks instead of hanging the suite.
config.substitutions.append(("%timeout", __import__("shutil").which("timeout") or "timeout"))
if __import__("shutil").which("mpirun"): config.available_features.add("mpirun"); config.substitutions.append(("%mpirun", "env PATH=" + os.environ["PATH"] + " " + __import__("shutil").which("mpirun")))  # mpirun needs the system PATH; dsc-run-np-mpi.test
config.substitutions.append(("%mpi_path", os.environ["PATH"]))  # for tools that start mpirun themselves: dsc-launch-mpi.test

tool_dirs = [config.dsc_tools_dir, config.llvm_tools_dir]
tools = ["dsc-opt", "dsc-translate", ToolSubst("dsc-run", unresolved="ignore"),
         ToolSubst("dsc-launch", unresolved="ignore"),
         ToolSubst("dsc-gradcheck", unresolved="ignore"),
         ToolSubst("dsc-hf-check", unresolved="ignore"),
         ToolSubst("dsc-generate", unresolved="ignore")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.dsc_tools_dir, append_path=False)
# dsc-serve is built where cpp-httplib is (scripts/setup.sh installs it).
if os.path.exists(os.path.join(config.dsc_tools_dir, "dsc-serve")):
    config.available_features.add("dsc-serve")
    config.substitutions.append(
        ("%dsc_serve_path", os.path.join(config.dsc_tools_dir, "dsc-serve")))
