// The TorchScript task: the model contract is checked before training, layer groups follow
// the module's children, tied weights are one parameter, and an export holds the given
// parameters. Modules are built here with torch::jit::Module::define, no Python needed.
#include <fstream>

#include <gtest/gtest.h>
#include <torch/script.h>

#include "tests/support/test_dir.hpp"
#include "training/task.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

constexpr std::int64_t width = 8;

// emb (256 x 8) -> * scale -> logits over `vocab` from head's weight; `tied` makes head
// use emb's tensor. `forward_source` replaces forward when given.
std::string write_module(const testing::temp_dir& dir, const std::string& name, std::int64_t vocab, bool tied,
                         const std::string& forward_source = "") {
  torch::manual_seed(3);
  torch::jit::Module emb("Emb");
  auto table = torch::randn({256, width});
  emb.register_parameter("weight", table, false);
  emb.define("def forward(self, x):\n  return self.weight[x]\n");
  torch::jit::Module head("Head");
  head.register_parameter("weight", tied ? table : torch::randn({vocab, width}), false);
  torch::jit::Module m("Toy");
  m.register_parameter("scale", torch::ones({1}), false);
  m.register_module("emb", emb);
  m.register_module("head", head);
  m.define(forward_source.empty()
               ? "def forward(self, x):\n  return (self.emb.forward(x) * self.scale) @ self.head.weight.t()\n"
               : forward_source);
  const auto path = dir.sub(name);
  m.save(path);
  return path;
}

run_config toy_config() {
  run_config cfg;
  cfg.example = "torchscript";
  cfg.context = 8;
  cfg.batch_size = 2;
  cfg.eval_batches = 2;
  cfg.fragments = 2;
  cfg.data = ATOLL_TEST_DATA;  // tinyshakespeare.txt
  return cfg;
}

std::unique_ptr<task> toy_task(const std::string& file, const run_config& cfg) {
  replica_spec spec;
  spec.model_file = file;
  return make_task(cfg, spec);
}

TEST(TorchScriptTask, LayerGroupsAreTheOwnParametersThenEachChildInOrder) {
  testing::temp_dir dir;
  auto t = toy_task(write_module(dir, "m.pt", 256, false), toy_config());
  const auto groups = t->layer_groups();
  ASSERT_EQ(groups.size(), 3u);  // scale, emb, head
  EXPECT_EQ(groups[0][0].numel(), 1);
  EXPECT_EQ(groups[1][0].sizes(), torch::IntArrayRef({256, width}));
  EXPECT_EQ(groups[2][0].sizes(), torch::IntArrayRef({256, width}));
  EXPECT_EQ(t->parameters().size(), 3u);
}

TEST(TorchScriptTask, ATiedWeightIsOneParameterInTheFirstGroupThatHoldsIt) {
  testing::temp_dir dir;
  auto t = toy_task(write_module(dir, "tied.pt", 256, true), toy_config());
  const auto groups = t->layer_groups();
  ASSERT_EQ(groups.size(), 2u) << "head's only parameter is emb's";
  EXPECT_EQ(t->parameters().size(), 2u) << "the optimizer steps the shared tensor once";
}

TEST(TorchScriptTask, ItsSignatureNamesEachGroupsParametersForARunOfPythonNodes) {
  testing::temp_dir dir;
  auto signature = torchscript_signature(write_module(dir, "m.pt", 256, false));
  ASSERT_TRUE(signature) << signature.err().message;
  EXPECT_EQ(*signature,
            "scale float32 1 0\n"
            "emb.weight float32 256x8 1\n"
            "head.weight float32 256x8 2\n");
  auto tied = torchscript_signature(write_module(dir, "tied.pt", 256, true));
  ASSERT_TRUE(tied);
  EXPECT_EQ(*tied, "scale float32 1 0\nemb.weight float32 256x8 1\n");  // head's weight is emb's
  // A C++ node of an external run (run.example = external) trains its --model as TorchScript.
  auto cfg = toy_config();
  cfg.example = "external";
  EXPECT_EQ(toy_task(dir.sub("m.pt"), cfg)->layer_groups().size(), 3u);
  EXPECT_THROW(toy_task("", cfg), task_error);  // without a file: the model is the Python nodes'
  std::ofstream(dir.sub("junk.pt")) << "not a zip archive";
  EXPECT_EQ(torchscript_signature(dir.sub("junk.pt")).err().code, errc::bad_model);
}

TEST(TorchScriptTask, AModelThatBreaksTheContractIsRefusedBeforeTraining) {
  testing::temp_dir dir;
  std::ofstream(dir.sub("junk.pt")) << "not a zip archive";
  struct row {
    const char* name;
    std::string file;
    const char* says;
  };
  const std::vector<row> table = {
      {"no file given", "", "needs a model file"},
      {"not TorchScript", dir.sub("junk.pt"), "not a TorchScript module"},
      {"missing", dir.sub("absent.pt"), "not a TorchScript module"},
      {"logits over 300 tokens for byte data", write_module(dir, "wide.pt", 300, false), "300 logits"},
      {"[B, T] output",
       write_module(dir, "flat.pt", 256, false, "def forward(self, x):\n  return self.emb.forward(x).sum(-1)\n"),
       "must return float logits [1, 8, V]"},
      {"a tuple",
       write_module(dir, "tuple.pt", 256, false, "def forward(self, x):\n  return (self.emb.forward(x), x)\n"),
       "must return a tensor"},
      {"fails on token ids", write_module(dir, "fails.pt", 256, false, "def forward(self, x):\n  return x @ x\n"),
       "forward() fails"},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(r.name);
    const auto err = check_task(toy_config(), r.file, 2, /*with_data=*/false);
    ASSERT_TRUE(err);
    EXPECT_EQ(err.code, errc::bad_model);
    EXPECT_NE(err.message.find(r.says), std::string::npos) << err.message;
  }
  EXPECT_FALSE(check_task(toy_config(), write_module(dir, "good.pt", 256, false), 2, true));
}

TEST(TorchScriptTask, AnExportHoldsTheGivenFragmentsAndLoadsAsTorchScript) {
  testing::temp_dir dir;
  const auto file = write_module(dir, "m.pt", 256, false);
  auto cfg = toy_config();
  // Strided: groups 0 (scale) and 2 (head) are fragment 0, group 1 (emb) fragment 1.
  std::vector<std::vector<float>> fragments(2);
  for (std::size_t i = 0; i < 1 + 256 * width; ++i) fragments[0].push_back(static_cast<float>(i) * 0.5f);
  for (std::size_t i = 0; i < 256 * width; ++i) fragments[1].push_back(-static_cast<float>(i));
  const auto out = dir.sub("trained.pt");
  ASSERT_FALSE(export_model(cfg, file, fragments, out));
  auto loaded = torch::jit::load(out);
  EXPECT_EQ(loaded.attr("scale").toTensor().item<float>(), 0.0f);
  EXPECT_EQ(loaded.attr("head").toModule().attr("weight").toTensor()[0][1].item<float>(), 1.0f);
  EXPECT_EQ(loaded.attr("emb").toModule().attr("weight").toTensor()[1][0].item<float>(), -8.0f);
  fragments[1].pop_back();
  const auto err = export_model(cfg, file, fragments, dir.sub("short.pt"));
  EXPECT_EQ(err.code, errc::tensor_mismatch);
}

TEST(ShakespeareTask, AnExportIsAStateDictWithTheGivenParameters) {
  testing::temp_dir dir;
  run_config cfg;
  cfg.fragments = 1;
  std::size_t n = 0;
  for (const auto& g : make_task(cfg, replica_spec{})->layer_groups())
    for (const auto& p : g) n += static_cast<std::size_t>(p.numel());
  std::vector<std::vector<float>> fragments(1, std::vector<float>(n, 0.25f));
  ASSERT_FALSE(export_model(cfg, "", fragments, dir.sub("gpt.pt")));
  std::ifstream in(dir.sub("gpt.pt"), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto state = torch::pickle_load(bytes).toGenericDict();
  EXPECT_EQ(state.at("tok.weight").toTensor()[3][4].item<float>(), 0.25f);
  EXPECT_TRUE(state.contains("block0.qkv.weight"));
  EXPECT_TRUE(state.contains("mask")) << "buffers too";
}

}  // namespace
}  // namespace atl
