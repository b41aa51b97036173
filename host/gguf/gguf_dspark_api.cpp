// The DSpark calls of the GGUF loader (include/dfsel/dspark.h) over the handle's DSpark view.
#include "dfsel/dspark.h"
#include "host/gguf/gguf_handle.h"

extern "C" {

dfsel_status dfsel_gguf_draft_kind(const dfsel_gguf* gguf, dfsel_draft_kind* kind) {
  if (dfsel_status s = dfsel::gguf::check(gguf, "dfsel_gguf_draft_kind", kind, "kind")) return s;
  *kind = gguf->is_dspark ? DFSEL_DRAFT_DSPARK : DFSEL_DRAFT_DFLASH2;
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_dspark_desc(const dfsel_gguf* gguf, dfsel_dspark_plan_desc* desc) {
  dfsel_status s;
  if ((s = dfsel::gguf::check(gguf, "dfsel_gguf_dspark_desc", desc, "desc")) ||
      (s = dfsel::gguf::check_kind(gguf, "dfsel_gguf_dspark_desc", true)))
    return s;
  gguf->dspark.describe(desc);
  return DFSEL_SUCCESS;
}

}  // extern "C"
