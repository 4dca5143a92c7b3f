#include "runtime/core/exit_status.hpp"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace atl {
namespace {

// Why a process gave up, and the exit status a controller acts on (runtime/core/exit_status.hpp).
TEST(ExitStatus, EachReasonToGiveUpHasTheStatusAControllerActsOn) {
  const struct {
    errc why;
    exit_status status;
  } table[] = {
      {errc::none, exit_status::finished},
      {errc::invalid_config, exit_status::config},  // flags, config, keys
      {errc::bad_model, exit_status::config},
      {errc::bad_data, exit_status::config},
      {errc::model_mismatch, exit_status::refused},  // the run's model is another
      {errc::cluster_mismatch, exit_status::refused},
      {errc::version_mismatch, exit_status::refused},
      {errc::timeout, exit_status::retriable},  // the head unreachable past --wait-for-head
      {errc::storage_failure, exit_status::retriable},
      {errc::storage_full, exit_status::retriable},
      {errc::not_ready, exit_status::retriable},
      {errc::handler_failed, exit_status::retriable},
  };
  for (const auto& row : table) EXPECT_EQ(exit_status_for(row.why), row.status) << to_string(row.why);
}

TEST(ExitStatus, EveryReasonMapsToAStatusAndTheStatusesAreDistinctWithStableNames) {
  std::set<int> codes;
  std::set<std::string> names;
  for (auto s : {exit_status::finished, exit_status::retriable, exit_status::config, exit_status::lost_lead,
                 exit_status::refused, exit_status::drained}) {
    codes.insert(code_of(s));
    names.insert(to_string(s));
  }
  EXPECT_EQ(codes.size(), 6u);
  EXPECT_EQ(names.size(), 6u);
  EXPECT_EQ(names.count("unknown"), 0u);
  EXPECT_EQ(code_of(exit_status::drained), 128 + 15) << "as a shell reports SIGTERM";
  for (int c = 1; c <= static_cast<int>(last_errc); ++c)
    EXPECT_NE(exit_status_for(static_cast<errc>(c)), exit_status::finished) << "a reason to give up is no finish";
}

}  // namespace
}  // namespace atl
