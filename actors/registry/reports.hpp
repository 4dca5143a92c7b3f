#pragma once
// The registry's handlers of reports: Progress, EvalReport, WorkerDone and RoundAck of
// workers; RoundReport and RoundProgress of coordinators. They go into the views (the
// answers of atollctl) and the metrics file; a WorkerDone also changes who takes part.
#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

void on_worker_report(self_ptr self, const wire::message_ptr& msg);
void on_round_report(self_ptr self, const wire::message_ptr& msg);
void on_round_progress(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::registry_detail
