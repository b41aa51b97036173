// Set-up-time copies between the host and a device, for plan creation's weight widening, and
// the check that a CUDA plan's weights are memory its device can read. Builds without CUDA
// answer DFSEL_UNSUPPORTED.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "host/status.h"

namespace dfsel {

// rows rows of row_bytes each, pitch bytes apart on the device, to dst (packed); `what` names
// them in a failure's message.
Status device_rows_to_host(const void* src, size_t pitch, size_t row_bytes, int64_t rows, int device, void* dst,
                           const char* what);
// A device copy of bytes host bytes; *out is released with device_release.
Status device_upload(const void* src, size_t bytes, int device, void** out);
void device_release(void* p, int device);
// Success when device `device` can read p: its own memory, managed memory, or host memory
// allocated or registered by CUDA. Pageable host memory and another device's memory are
// refused (DFSEL_INVALID_ARGUMENT, `what` named): a kernel would fault on them, or read them
// across the bus at a fraction of the speed.
Status check_device_readable(const void* p, int device, const char* what);
// Success when p is not device memory (what a CPU plan reads); a build without CUDA, or a
// machine without a GPU, has no device memory to find.
Status check_host_readable(const void* p, const char* what);

}  // namespace dfsel
