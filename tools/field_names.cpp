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

std::string in_users_words(const std::string& msg, const UsersWords& words, const std::string& draft,
                           bool* about_draft) {
  const std::string keys = draft.empty() ? msg : rename_fields(msg, words.draft_keys, words.n_draft_keys);
  *about_draft = keys != msg;
  return *about_draft ? draft + ": " + keys : rename_fields(msg, words.flags, words.n_flags);
}

}  // namespace dfsel::tools
