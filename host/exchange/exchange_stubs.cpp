// The answers of a build without CUDA or without NCCL.
#include "host/exchange/exchange.h"

namespace dfsel {

#if !defined(DFSEL_WITH_CUDA)
// No CUDA backend exists in such a build, so no plan asks for a device exchange.
std::unique_ptr<Exchange> make_device_exchange() { return nullptr; }
#endif

#if !defined(DFSEL_WITH_NCCL)
Status make_nccl_exchange(void*, const RankSummary&, const Status&, std::unique_ptr<Exchange>*) {
  return fail(DFSEL_UNSUPPORTED, "nccl_comm is set but this build of dfsel has no NCCL exchange");
}
#endif

}  // namespace dfsel
