// ukdpack-validate: placeholder until the loader lands (issue: C++ runtime).
#include <cstdio>

int main() {
  std::fputs("ukdpack-validate: the loader is not built yet\n", stderr);
  return 2;
}
