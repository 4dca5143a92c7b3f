#pragma once
// The head as a process (`atoll up`): the registry, keeper/0 and the model's home on one
// machine, with its HTTP endpoint and, on etcd, the election of which head leads. The
// registry actor itself is actors/registry; this library runs it. Returns exit codes.
#include <string>
#include <vector>

namespace atl {

struct head_options {
  std::string listen = "tcp://127.0.0.1:7070";
  std::string run_dir;
  std::string config_file;
  std::vector<std::string> overrides;  // "key=value"
  std::string metrics_file;  // default: RUN_DIR/metrics.jsonl
  std::string keys_dir;  // CURVE keys (`atoll keygen`); empty: plain TCP
  bool insecure = false;  // allow plain TCP on a non-loopback address
  std::string model_file;  // a TorchScript model to train (copied to RUN_DIR/model.pt)
  std::string http;  // "tcp://HOST:PORT": /metrics and the dashboard (head/head_http.hpp); empty: none
  // "etcd://HOST:PORT[,HOST:PORT...][/NAME]": the registry lives in etcd and heads fail over
  // (head/head_failover.cpp); empty: in RUN_DIR's RocksDB, one head.
  std::string registry;
  int election_ttl_s = 3;  // the leading head's etcd lease: a lost head is replaced after about this long
};
int run_head(const head_options& opt);

}  // namespace atl
