#include "field_names.h"

#include <cstring>

namespace dfsel::tools {

std::string rename_fields(std::string msg, const FieldName* names, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const size_t len = std::strlen(names[i].field);
    for (size_t at = msg.find(names[i].field); at != std::string::npos; at = msg.find(names[i].field, at)) {
      msg.replace(at, len, names[i].name);
      at += std::strlen(names[i].name);
    }
  }
  return msg;
}

std::string refusal(dfsel_status st, const char* msg, const UsersWords& words, const std::string& draft,
                    bool* bad_request) {
  const std::string flags = rename_fields(msg, words.flags, words.n_flags);
  bool about_draft = false;
  std::string why = flags;
  if (!draft.empty() && st == DFSEL_INVALID_ARGUMENT) {
    // With a draft the flags set only what it leaves open (blocks, shards, threads, a run's
    // values): a refusal that names one of the draft's keys, or none of the flags, is the draft's.
    const std::string keys = rename_fields(msg, words.draft_keys, words.n_draft_keys);
    about_draft = keys != msg || flags == msg;
    if (about_draft) why = draft + ": " + keys;
  }
  if (bad_request) *bad_request = st == DFSEL_INVALID_ARGUMENT && !about_draft;
  return why;
}

}  // namespace dfsel::tools
