// What both modes of dfsel_write_draft (DFlash2 drafts, write_draft.cpp; DSpark drafts,
// write_dspark_draft.cpp) share: how a refusal is reported, the type names and quant block
// sizes of their flags, and the judgement of the written file by the reader and the library,
// so that the writer refuses what the dfsel command would refuse.
#pragma once

#include <cstdint>
#include <string>

#include "dfsel/dfsel.h"

namespace dfsel::test {

// Prints "dfsel_write_draft: why" and returns the exit status of a bad request, 2.
int refuse_draft(const std::string& why);

// The types the writers store, by their lower-case names (kDraftTypes lists them).
extern const char* const kDraftTypes;
bool parse_draft_type(const std::string& s, dfsel_type* t);
// "FLAG is f32, ... or q6_k, not 'V'".
std::string draft_type_error(const std::string& flag, const std::string& v);

// Elements a row of type t comes in: 32 for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, 256 for the K-quants,
// else 1.
int64_t quant_block(dfsel_type t);

// What the dfsel command would do with the written file: open it with the reader and describe
// a CPU plan of its kind on it. "" when both accept it, else the reason, the library's fields
// named by the writer's flags.
std::string judged_by_the_reader(const std::string& path);

}  // namespace dfsel::test
