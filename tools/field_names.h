// The library names the fields of its C API in a refusal ("config.top_k = 100 must be in
// [1, 64]"); a command speaks of its own flags, or of a draft's keys. The range stays the
// library's, written once; only the name is put in the user's words.
#pragma once

#include <string>

#include "dfsel/dfsel.h"

namespace dfsel::tools {

struct FieldName {
  const char* field;  // as the library writes it: "config.top_k"
  const char* name;   // as the user gave it: "--top-k", "dflash.selector_top_k"
};

// msg with every field of names[0..n) written as its name.
std::string rename_fields(std::string msg, const FieldName* names, size_t n);

template <size_t N>
std::string rename_fields(const std::string& msg, const FieldName (&names)[N]) {
  return rename_fields(msg, names, N);
}

// What a command calls the fields of its descriptions: its flags, and, when the sizes come from
// a draft, the draft's keys.
struct UsersWords {
  const FieldName* flags;
  size_t n_flags;
  const FieldName* draft_keys;
  size_t n_draft_keys;
};

// A refusal of the library (status st, message msg) in the user's words, by one rule for both
// modes. draft: the draft's file as it is to be shown, or "" when the sizes came from flags.
// With a draft, a value refused (DFSEL_INVALID_ARGUMENT) that is one of its own keys or tensors,
// or nothing the flags set, is the file's: the message names the file and the key; any other
// names the flags. *bad_request (may be NULL): a value the flags gave was refused (exit 2).
std::string refusal(dfsel_status st, const char* msg, const UsersWords& words, const std::string& draft,
                    bool* bad_request);

}  // namespace dfsel::tools
