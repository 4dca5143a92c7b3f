#pragma once
// Minimal leveled logging to stderr: "[12.345 atoll head] message". Thread-safe.
// ATOLL_LOG=debug turns on debug lines; warn or error keeps only those and worse.
#include <string>

namespace atl {

void set_log_name(const std::string& process_name);
void log_info(const std::string& line);
void log_warn(const std::string& line);
void log_error(const std::string& line);
void log_debug(const std::string& line);

}  // namespace atl
