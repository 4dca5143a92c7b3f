#include "actors/worker/done.hpp"

namespace atl {

void send_worker_done(mailer& mail, const std::string& registry, std::uint64_t epoch,
                      const worker_done_report& report) {
  wire::outgoing out;
  auto d = out.envelope.initWorkerDone();
  d.setSteps(report.steps);
  d.setFinalLoss(report.final_loss);
  d.setValLoss(report.val_loss);
  d.setTokensPerSec(report.tokens_per_sec);
  d.setWallSeconds(report.wall_seconds);
  d.setWaitSeconds(report.wait_seconds);
  d.setBytesReceived(report.bytes_received);
  d.setBytesSent(report.bytes_sent);
  auto acks = d.initLastAcks(static_cast<unsigned>(report.last_acks.size()));
  for (unsigned i = 0; i < report.last_acks.size(); ++i) {
    acks[i].setFragment(report.last_acks[i].fragment);
    acks[i].setRound(report.last_acks[i].round);
    acks[i].setDigest(report.last_acks[i].digest);
    acks[i].setAdopted(report.last_acks[i].adopted);
  }
  mail.send(registry, epoch, out);
}

}  // namespace atl
