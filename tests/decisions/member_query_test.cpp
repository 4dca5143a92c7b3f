// Which members a listing shows (actors/decisions/member_query.hpp): what each argument
// parses to, what is refused, and which rows a page holds.
#include <gtest/gtest.h>

#include "actors/decisions/member_query.hpp"

namespace atl {
namespace {

TEST(MemberQuery, EachArgumentParsesToItsQueryAndBack) {
  struct row {
    const char* text;
    std::optional<std::string> state;
    std::size_t offset, limit;
  };
  const std::vector<row> rows = {
      {"", std::nullopt, 0, 0},
      {"state=dead", "dead", 0, 0},
      {"limit=50", std::nullopt, 0, 50},
      {"offset=100,limit=50", std::nullopt, 100, 50},
      {"limit=5,state=active,offset=10", "active", 10, 5},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.text);
    const auto q = parse_member_query(r.text);
    ASSERT_TRUE(q) << q.err().describe();
    EXPECT_EQ(q->state, r.state);
    EXPECT_EQ(q->offset, r.offset);
    EXPECT_EQ(q->limit, r.limit);
    const auto again = parse_member_query(to_string(*q));
    ASSERT_TRUE(again);
    EXPECT_EQ(again->state, q->state);
    EXPECT_EQ(again->offset, q->offset);
    EXPECT_EQ(again->limit, q->limit);
  }
}

TEST(MemberQuery, BadArgumentsAreRefusedNamingWhatIsWrong) {
  const std::vector<std::pair<const char*, const char*>> rows = {
      {"state=asleep", "unknown state 'asleep'"},
      {"limit=-1", "limit must be a whole number"},
      {"limit=1e3", "limit must be a whole number"},
      {"offset=", "offset must be a whole number"},
      {"limit=99999999999", "limit must be a whole number"},
      {"page=2", "unknown key 'page'"},
      {"dead", "'dead' is not key=value"},
  };
  for (const auto& [text, why] : rows) {
    SCOPED_TRACE(text);
    const auto q = parse_member_query(text);
    ASSERT_FALSE(q);
    EXPECT_EQ(q.err().code, errc::invalid_config);
    EXPECT_NE(q.err().message.find(why), std::string::npos) << q.err().message;
  }
}

TEST(MemberQuery, APageHoldsTheRowsFromItsOffsetUpToItsLimit) {
  member_query all, page, tail;
  page.offset = 2;
  page.limit = 3;
  tail.offset = 4;
  std::vector<std::size_t> on_all, on_page_rows, on_tail;
  for (std::size_t i = 0; i < 8; ++i) {
    if (on_page(all, i)) on_all.push_back(i);
    if (on_page(page, i)) on_page_rows.push_back(i);
    if (on_page(tail, i)) on_tail.push_back(i);
  }
  EXPECT_EQ(on_all.size(), 8u);
  EXPECT_EQ(on_page_rows, (std::vector<std::size_t>{2, 3, 4}));
  EXPECT_EQ(on_tail, (std::vector<std::size_t>{4, 5, 6, 7}));
}

}  // namespace
}  // namespace atl
