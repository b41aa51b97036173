#!/usr/bin/env bash
# Installs the Debian / Ubuntu packages that building and testing dfsel need, and only those
# that are missing: a second run installs nothing and says so. Used by the README's first
# command and by .ci/run.
#   scripts/install-deps.sh         cmake, ninja, g++, GoogleTest, Google Benchmark, and
#                                   python3 with NumPy, pytest and pip (the Python package's tests)
#                                   and matplotlib (bench/plot/make_figures.py and its test)
#   scripts/install-deps.sh --ci    and clang with libFuzzer's runtime (.ci/run's fuzz stage)
#   scripts/install-deps.sh --dry-run   says what it would install and checks Python, installs nothing
# Runs apt-get through sudo when not root. The CUDA Toolkit and NCCL come from NVIDIA's
# repository (README, Prerequisites); without nvcc the build is the CPU backend alone.
# Debian's NumPy and pytest serve Debian's /usr/bin/python3 only: the Python that the tests
# will run on ($PYTHON, else python3 on PATH, which may be a pyenv, conda or venv one) is
# checked for them last, and what to do is said when it lacks them.
set -euo pipefail
ci=0
dry=0
for a in "$@"; do
  case $a in
    --ci) ci=1 ;;
    --dry-run) dry=1 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown option $a" >&2; exit 2 ;;
  esac
done

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
dpkg -s libgtest-dev >/dev/null 2>&1 || need+=(libgtest-dev)
dpkg -s libbenchmark-dev >/dev/null 2>&1 || need+=(libbenchmark-dev)
# The Python tests run on Debian's interpreter, whose NumPy, pytest, pip and matplotlib come from apt.
for pkg in python3 python3-numpy python3-pytest python3-pip python3-matplotlib; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# libFuzzer's runtime ships apart from clang on Debian and Ubuntu.
fuzzer_works() {
  command -v clang++ >/dev/null || return 1
  local d ok
  d=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$d/f.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$d/f.cpp" -o "$d/f" >/dev/null 2>&1 && ok=0 || ok=1
  rm -rf "$d"
  return $ok
}
if [ $ci = 1 ]; then
  command -v clang++ >/dev/null || need+=(clang)
  fuzzer_works || need+=(libclang-rt-dev)
fi

if [ ${#need[@]} -gt 0 ] && [ $dry = 1 ]; then
  echo "install-deps: would install ${need[*]}"
elif [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || { echo "install-deps: missing ${need[*]}, and apt-get is not here to install them" >&2; exit 1; }
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: missing ${need[*]}; run as root or install sudo" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "install-deps: installing ${need[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" ||
    { # older releases name the fuzzer runtime after clang's major version
      major=$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]/libclang-rt-dev/libclang-rt-$major-dev}"; }
else
  echo "install-deps: nothing to install"
fi

# CMakeLists.txt needs CMake 3.24 (Debian 12 and Ubuntu 24.04 ship newer; Ubuntu 22.04 has 3.22).
v=$(cmake --version | sed -n 's/^cmake version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
read -r major minor <<<"$v"
if [ "$major" -lt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -lt 24 ]; }; then
  echo "install-deps: cmake $major.$minor is older than 3.24; install a newer one (Kitware's apt repository, apt.kitware.com)" >&2
  exit 1
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no nvcc: the build will be the CPU backend only (README: CUDA Toolkit 13)"
fi

# The Python the tests will use, and what it lacks of what they import.
python=${PYTHON:-$(command -v python3 || true)}
if [ -z "$python" ]; then
  echo "install-deps: no python3 on PATH; the Python tests run on Debian's: /usr/bin/python3 -m pytest tests/python"
else
  missing=()
  for mod in numpy pytest matplotlib; do
    "$python" -c "import $mod" >/dev/null 2>&1 || missing+=("$mod")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    version=$("$python" -c 'import sys; print("Python %d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo "version unknown")
    echo "install-deps: the Python the tests would use, $python ($version), lacks: ${missing[*]}" >&2
    if [ "$(readlink -f "$python")" = "$(readlink -f /usr/bin/python3 2>/dev/null)" ]; then
      echo "install-deps:   it is Debian's: apt-get install python3-numpy python3-pytest python3-matplotlib (this script does it without --dry-run)" >&2
    else
      echo "install-deps:   it is not Debian's /usr/bin/python3, which this script provides for. Either install them" >&2
      echo "install-deps:   there ($python -m pip install ${missing[*]}), or run the tests with Debian's:" >&2
      echo "install-deps:   /usr/bin/python3 -m pytest tests/python (as .ci/run does), or a venv of Debian's that sees" >&2
      echo "install-deps:   its packages, which needs no package index: /usr/bin/python3 -m venv --system-site-packages .venv" >&2
    fi
  fi
fi
