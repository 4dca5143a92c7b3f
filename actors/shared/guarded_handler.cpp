#include "actors/shared/guarded_handler.hpp"

#include <kj/exception.h>

#include "runtime/process/log.hpp"

namespace atl {

error error_of_thrown(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const kj::Exception& e) {
    return make_error(errc::malformed_frame,
                      std::string("the message could not be read: ") + e.getDescription().cStr());
  } catch (const std::exception& e) {
    return make_error(errc::handler_failed, e.what());
  } catch (...) {
    return make_error(errc::handler_failed, "an exception of unknown type");
  }
}

void refuse_thrown(mailer& mail, const wire::message& msg, std::uint64_t epoch, const std::string& role,
                   std::exception_ptr thrown) {
  const auto err = error_of_thrown(thrown);
  log_error(role + ": a " + wire::kind_name(msg.kind()) + " from " + msg.sender() +
            " was dropped, the actor goes on: " + err.describe());
  if (msg.kind() == schema::Envelope::REFUSAL) mail.count_refusal(err.code);
  else mail.refuse(msg, err, epoch);
}

}  // namespace atl
