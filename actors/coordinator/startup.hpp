#pragma once
// How a coordinator starts (actors/coordinator/startup.cpp): the members, then the
// committed state from its keepers. A function that loads the state returns true: the
// shell then seeds a new run or opens the next round.
#include "actors/coordinator/base.hpp"

namespace atl::coordinator_detail {

void request_membership(self_ptr self);
void request_startup_state(self_ptr self);  // the members, then the committed state
// load_from_every_keeper: resumes once every keeper of the Membership answered.
bool resume_when_every_keeper_answered(self_ptr self);
bool on_load_reply(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::coordinator_detail
