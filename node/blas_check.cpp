#include <link.h>
#include <climits>
#include <cstdlib>
#include <string>

#include "node/lifecycle.hpp"
#include "runtime/process/log.hpp"

namespace atl {

void warn_if_reference_blas() {
  std::string blas;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("libblas.so") != std::string::npos) *static_cast<std::string*>(out) = name;
        return 0;
      },
      &blas);
  if (blas.empty()) return;
  char resolved[PATH_MAX];
  const std::string real = ::realpath(blas.c_str(), resolved) ? resolved : blas;
  // Debian's reference BLAS lives in .../blas/; OpenBLAS in .../openblas-*/.
  if (real.find("openblas") == std::string::npos && real.find("blis") == std::string::npos &&
      real.find("mkl") == std::string::npos)
    log_warn("LibTorch is using the reference BLAS (" + real +
             "): training will be about 50x slower. Install OpenBLAS: apt-get install libopenblas0-pthread");
}

}  // namespace atl
