#include <gtest/gtest.h>

#include "runtime/process/config.hpp"

namespace atl {
namespace {

TEST(Config, DefaultsAreValid) { EXPECT_FALSE(validate(run_config{})); }

TEST(Config, AFileOverridesDefaults) {
  auto cfg = parse_config_text("[diloco]\nsync_every = 25\nouter_lr = 0.5\n[run]\nexample = \"mlp\"\n", "t.toml");
  ASSERT_TRUE(cfg) << cfg.err().describe();
  EXPECT_EQ(cfg->sync_every, 25);
  EXPECT_DOUBLE_EQ(cfg->outer_lr, 0.5);
  EXPECT_EQ(cfg->example, "mlp");
  EXPECT_EQ(cfg->steps, run_config{}.steps);
}

TEST(Config, AnUnknownKeyIsRefusedByName) {
  auto cfg = parse_config_text("[diloco]\nsync_evry = 25\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.err().code, errc::invalid_config);
  EXPECT_NE(cfg.err().message.find("diloco.sync_evry"), std::string::npos) << cfg.err().message;
}

TEST(Config, AWrongTypeIsRefusedByName) {
  auto cfg = parse_config_text("[run]\nsteps = \"many\"\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("run.steps"), std::string::npos);
  EXPECT_NE(cfg.err().message.find("integer"), std::string::npos);
}

TEST(Config, AnOutOfRangeValueIsRefusedByName) {
  auto cfg = parse_config_text("[diloco]\nouter_momentum = 1.5\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("diloco.outer_momentum"), std::string::npos);
}

TEST(Config, ATopLevelKeyOutsideASectionIsRefused) {
  auto cfg = parse_config_text("steps = 3\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("steps"), std::string::npos);
}

TEST(Config, SyntaxErrorsNameTheLine) {
  auto cfg = parse_config_text("[run]\nsteps = = 3\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("t.toml:2"), std::string::npos) << cfg.err().message;
}

TEST(Config, RelationsBetweenKnobsAreChecked) {
  auto cfg = parse_config_text("[model]\nwidth = 130\nheads = 4\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("model.heads"), std::string::npos);
  // A sparse codec's positions are one byte: its chunk holds at most 256 values.
  cfg = parse_config_text("[diloco]\ncodec = \"topk32\"\ncodec_chunk = 512\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("diloco.codec_chunk: 512"), std::string::npos) << cfg.err().message;
  EXPECT_TRUE(parse_config_text("[diloco]\ncodec = \"topk32\"\ncodec_chunk = 256\n", "t.toml"));
  // So does a sparse result codec's, whatever the contributions' codec.
  cfg = parse_config_text("[diloco]\ncodec = \"fp4\"\nresult_codec = \"topk16\"\ncodec_chunk = 512\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("(topk16)"), std::string::npos) << cfg.err().message;
  cfg = parse_config_text("[diloco]\nresult_codec = \"topk8\"\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("diloco.result_codec"), std::string::npos) << cfg.err().message;
  // A thread layout is TxB or auto.
  cfg = parse_config_text("[run]\nthread_layout = \"2by2\"\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("run.thread_layout"), std::string::npos) << cfg.err().message;
  EXPECT_TRUE(parse_config_text("[run]\nthread_layout = \"1x2\"\n", "t.toml"));
  // A closed connection's confirmation must end before the lease would.
  cfg = parse_config_text("[cluster]\nheartbeat_ms = 100\nlease_ms = 400\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("cluster.confirm_ms"), std::string::npos) << cfg.err().message;
  EXPECT_TRUE(parse_config_text("[cluster]\nheartbeat_ms = 100\nlease_ms = 400\nconfirm_ms = 200\n", "t.toml"));
  EXPECT_TRUE(parse_config_text("[cluster]\nheartbeat_ms = 100\nlease_ms = 400\nconfirm_ms = 0\n", "t.toml"));
  // The adaptive grace's bounds in order, and round_close one of its two values.
  cfg = parse_config_text("[diloco]\nround_close = \"adaptive\"\ngrace_min_ms = 500\ngrace_max_ms = 100\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("diloco.grace_min_ms"), std::string::npos) << cfg.err().message;
  EXPECT_FALSE(parse_config_text("[diloco]\nround_close = \"sometimes\"\n", "t.toml"));
  EXPECT_TRUE(parse_config_text("[diloco]\nround_close = \"adaptive\"\ngrace_k = 2.5\n", "t.toml"));
  // Sharded rounds: DiLoCo's, and no more coordinators than a registry places.
  cfg = parse_config_text("[run]\nmode = \"ddp\"\n[diloco]\nshards = 2\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("diloco.shards"), std::string::npos) << cfg.err().message;
  cfg = parse_config_text("[diloco]\nfragments = 100\nshards = 64\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("more than 4096 coordinators"), std::string::npos) << cfg.err().message;
  cfg = parse_config_text("[diloco]\nfragments = 3\nshards = 4\n", "t.toml");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(sync_units(*cfg), 12);
}

// diloco.outer = sparseloco: the coordinators step without momentum, every worker keeps
// error feedback decayed by sparseloco_beta (whatever diloco.error_feedback says);
// nesterov leaves the knobs as they are.
TEST(Config, TheOuterOptimizerSetsTheMomentumAndTheWorkersFeedback) {
  struct row {
    const char* toml;
    double momentum;
    bool feedback;
    double decay;
  };
  const row rows[] = {
      {"", 0.9, false, 1.0},
      {"[diloco]\nerror_feedback = true\nouter_momentum = 0.8\n", 0.8, true, 1.0},
      {"[diloco]\nouter = \"sparseloco\"\n", 0.0, true, 0.95},
      {"[diloco]\nouter = \"sparseloco\"\nsparseloco_beta = 0.9\nouter_momentum = 0.8\n", 0.0, true, 0.9},
  };
  for (const auto& r : rows) {
    auto cfg = parse_config_text(r.toml, "t.toml");
    ASSERT_TRUE(cfg) << r.toml;
    EXPECT_EQ(outer_momentum_of(*cfg), r.momentum) << r.toml;
    EXPECT_EQ(error_feedback_of(*cfg), r.feedback) << r.toml;
    EXPECT_EQ(feedback_decay_of(*cfg), r.decay) << r.toml;
  }
  auto bad = parse_config_text("[diloco]\nouter = \"adam\"\n", "t.toml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.err().message.find("diloco.outer"), std::string::npos) << bad.err().message;
  bad = parse_config_text("[diloco]\nouter = \"sparseloco\"\nsparseloco_beta = 1.5\n", "t.toml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.err().message.find("diloco.sparseloco_beta"), std::string::npos) << bad.err().message;
  EXPECT_TRUE(parse_config_text("[diloco]\noverlap = 5\ncarry_overlap = true\n", "t.toml"));
  bad = parse_config_text("[run]\nmode = \"ddp\"\n[diloco]\nouter = \"sparseloco\"\n", "t.toml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.err().message.find("diloco.outer"), std::string::npos) << bad.err().message;
}

TEST(Config, OverridesUseTheSameRules) {
  run_config cfg;
  EXPECT_FALSE(apply_override(cfg, "diloco.sync_every=7"));
  EXPECT_EQ(cfg.sync_every, 7);
  EXPECT_FALSE(apply_override(cfg, "run.example=mlp"));
  EXPECT_EQ(cfg.example, "mlp");
  EXPECT_EQ(apply_override(cfg, "diloco.sync_every=0").code, errc::invalid_config);
  EXPECT_EQ(apply_override(cfg, "nope=1").code, errc::invalid_config);
  EXPECT_EQ(apply_override(cfg, "run.steps").code, errc::invalid_config);
  EXPECT_EQ(cfg.sync_every, 7);  // refused overrides leave the config intact
}

TEST(Config, AModelPresetSetsTheShapeAndLaterKnobsRefineIt) {
  struct row {
    const char* name;
    std::vector<std::string> overrides;
    std::int64_t layers, width, heads, context;
  };
  const row rows[] = {
      {"default is small", {}, 4, 128, 4, 64},
      {"25m", {"model.preset=25m"}, 8, 512, 8, 128},
      {"100m", {"model.preset=100m"}, 14, 768, 12, 256},
      {"a later knob wins", {"model.preset=100m", "model.context=128"}, 14, 768, 12, 128},
      {"a later preset wins", {"model.width=64", "model.preset=25m"}, 8, 512, 8, 128},
  };
  for (const auto& r : rows) {
    run_config cfg;
    for (const auto& o : r.overrides) ASSERT_FALSE(apply_override(cfg, o)) << r.name << ": " << o;
    EXPECT_EQ(cfg.layers, r.layers) << r.name;
    EXPECT_EQ(cfg.width, r.width) << r.name;
    EXPECT_EQ(cfg.heads, r.heads) << r.name;
    EXPECT_EQ(cfg.context, r.context) << r.name;
  }
  // In a file the preset applies first, whatever the key order.
  auto file = parse_config_text("[model]\nwidth = 256\npreset = \"25m\"\n", "t.toml");
  ASSERT_TRUE(file) << file.err().describe();
  EXPECT_EQ(file->width, 256);
  EXPECT_EQ(file->layers, 8);
  // And it survives the trip to the nodes (the head sends its config as TOML).
  auto back = parse_config_text(to_toml(*file), "again");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->width, 256);
  EXPECT_EQ(back->layers, 8);
  run_config cfg;
  auto bad = apply_override(cfg, "model.preset=huge");
  ASSERT_TRUE(bad);
  EXPECT_NE(bad.message.find("small|25m|100m"), std::string::npos) << bad.message;
}

TEST(Config, TomlTextReadsBackIdentically) {
  run_config cfg;
  cfg.lr = 0.0031;
  cfg.outer_lr = 0.65;
  cfg.example = "mlp";
  cfg.sync_every = 33;
  auto back = parse_config_text(to_toml(cfg), "roundtrip");
  ASSERT_TRUE(back) << back.err().describe();
  EXPECT_EQ(to_toml(*back), to_toml(cfg));
  EXPECT_DOUBLE_EQ(back->lr, 0.0031);
  EXPECT_EQ(back->sync_every, 33);
}

// diloco.shards is a number or "auto" (0 inside: the head makes it a number when it creates
// the run); a config no head resolved runs the star.
TEST(Config, ShardsAreANumberOrAutoInFilesOverridesAndTheTextWrittenBack) {
  EXPECT_EQ(run_config{}.shards, 0) << "auto is the default";
  EXPECT_EQ(shards_of(run_config{}), 1);
  EXPECT_EQ(sync_units(run_config{}), 1);
  auto cfg = parse_config_text("[diloco]\nshards = \"auto\"\nfragments = 3\n", "t.toml");
  ASSERT_TRUE(cfg) << cfg.err().describe();
  EXPECT_EQ(cfg->shards, 0);
  EXPECT_EQ(sync_units(*cfg), 3);
  EXPECT_NE(to_toml(*cfg).find("shards = 'auto'"), std::string::npos) << to_toml(*cfg);
  auto back = parse_config_text(to_toml(*cfg), "roundtrip");
  ASSERT_TRUE(back) << back.err().describe();
  EXPECT_EQ(back->shards, 0);
  run_config over;
  ASSERT_FALSE(apply_override(over, "diloco.shards=4"));
  EXPECT_EQ(over.shards, 4);
  EXPECT_EQ(sync_units(over), 4);
  ASSERT_FALSE(apply_override(over, "diloco.shards=auto"));
  EXPECT_EQ(over.shards, 0);
  // Another word, a fraction or a number past the range is refused by name, the config as it was.
  for (const char* bad_value : {"automatic", "2.5", "65", "-1"}) {
    SCOPED_TRACE(bad_value);
    over.shards = 3;
    const auto err = apply_override(over, std::string("diloco.shards=") + bad_value);
    ASSERT_TRUE(err);
    EXPECT_NE(err.message.find("diloco.shards"), std::string::npos) << err.message;
    EXPECT_EQ(over.shards, 3);
  }
  cfg = parse_config_text("[diloco]\nshards = \"many\"\n", "t.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.err().message.find("expected an integer or \"auto\""), std::string::npos) << cfg.err().message;
  EXPECT_NE(describe_knobs().find("diloco.shards = \"auto\""), std::string::npos);
}

TEST(Config, EveryKnobIsDocumented) {
  for (const auto& k : knobs()) {
    EXPECT_GT(std::string(k.doc).size(), 5u) << k.key;
    EXPECT_NE(describe_knobs().find(k.key), std::string::npos) << k.key;
  }
}

}  // namespace
}  // namespace atl
