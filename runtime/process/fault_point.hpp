#pragma once
// Named fault points: a test kills a process at an exact protocol step.
//
//   ATOLL_FAULT_POINT=NAME[@N]   the N-th time (default 1) the process passes NAME, it says
//                                so on stderr and SIGKILLs itself
//
// Compiled in when ATOLL_FAULT_POINTS is defined (CMake option ATOLL_FAULT_POINTS, ON by
// default since the default build is the test build; packagers turn it OFF). Without it
// ATL_FAULT_POINT(name) is nothing at all.
//
// The points (grep ATL_FAULT_POINT for where each sits):
//   coordinator.committed   the keeper acknowledged round r; no worker has its result yet
//                           (early results: each holds it provisional, unconfirmed)
//   coordinator.provisional round r's results went out provisional; every keeper has its
//                           commit and may or may not have written it yet
//   keeper.appending        round r's record file is written; the key naming it is not
//   keeper.written          round r is durable; the coordinator has no acknowledgement
//   keeper.snapshotting     round r is acknowledged and applied; its snapshot is not written
//   worker.contributed      a contribution is sent; its result has not come
//
// Failing points, for what cannot be done at all rather than a crash:
//
//   ATOLL_FAIL_POINT=NAME        every pass through NAME fails (ATL_FAIL_POINT(NAME) is
//                                true, and the caller fails as it would for real)
//
//   worker.replica          the worker cannot build its replica (supervision and its
//                           restart budget, past the start-up checks that would refuse a
//                           real cause before any worker starts)
// Throwing points, for a handler that throws (no message may kill an actor):
//
//   ATOLL_THROW_POINT=NAME[@N]   the N-th pass (default 1) through NAME throws a
//                                kj::Exception, as a message read past its reader's budget
//                                would; the passes before and after it do not
//
//   registry.handler, coordinator.handler, keeper.handler, worker.handler, node.handler
//                           inside each role's message handler, before it reads the message
//                           (actors/shared/guarded_handler.hpp catches it)
#include <string>

namespace atl {

// Throws if NAME is the armed throwing point and this is its N-th pass.
void pass_throw_point(const char* name);
// Arms a throwing point from a test in this process (replacing ATOLL_THROW_POINT's; an empty
// name disarms), its pass count from zero.
void arm_throw_point(const std::string& name, long at = 1);

// Kills the process if NAME is the armed point and this is its N-th pass.
void hit_fault_point(const char* name);
// True if NAME is the armed failing point.
bool fail_point_armed(const char* name);

}  // namespace atl

#ifdef ATOLL_FAULT_POINTS
#define ATL_FAULT_POINT(name) ::atl::hit_fault_point(name)
#define ATL_FAIL_POINT(name) ::atl::fail_point_armed(name)
#define ATL_THROW_POINT(name) ::atl::pass_throw_point(name)
#else
#define ATL_FAULT_POINT(name) ((void)0)
#define ATL_FAIL_POINT(name) false
#define ATL_THROW_POINT(name) ((void)0)
#endif
