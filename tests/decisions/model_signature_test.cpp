#include "runtime/core/model_signature.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

const std::string run =
    "fc1.weight float32 128x784 0\nfc1.bias float32 128 0\nfc2.weight float32 10x128 1\nscale float32 scalar 2\n";

TEST(ModelSignature, FormatsAndParsesOneLineAParameter) {
  const std::vector<parameter_signature> params = {{"fc1.weight", "float32", {128, 784}, 0},
                                                   {"fc1.bias", "float32", {128}, 0},
                                                   {"fc2.weight", "float32", {10, 128}, 1},
                                                   {"scale", "float32", {}, 2}};
  EXPECT_EQ(format_signature(params), run);
  auto parsed = parse_signature(run);
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[0].shape, (std::vector<std::int64_t>{128, 784}));
  EXPECT_TRUE((*parsed)[3].shape.empty());
  EXPECT_EQ((*parsed)[2].group, 1u);
}

TEST(ModelSignature, RefusesWhatIsNotASignature) {
  for (const char* bad : {"", "fc1.weight float32 12\n", "fc1.weight float32 12x 0\n", "w float32 3 0 extra\n",
                          "w float32 -3 0\n", "w float32 3xa 0\n", "w float32 3 1\n",  // the first group is 0
                          "w float32 3 0\nv float32 3 2\n", "w float32 3 0\nv float32 3 -1\n"})
    EXPECT_EQ(parse_signature(bad).err().code, errc::invalid_config) << bad;
}

TEST(ModelSignature, NamesTheFirstDifference) {
  struct row {
    const char* node;
    const char* want;  // empty: the same model
  };
  const row rows[] = {
      {"fc1.weight float32 128x784 0\nfc1.bias float32 128 0\nfc2.weight float32 10x128 1\nscale float32 scalar 2\n",
       ""},
      {"fc1.weight float32 64x784 0\nfc1.bias float32 128 0\n",
       "parameter 1 is 'fc1.weight' float32 64x784 in group 0 here, 'fc1.weight' float32 128x784 in group 0 in the "
       "run"},
      {"fc1.weight float32 128x784 0\nfc1.bias float16 128 0\nfc2.weight float32 10x128 1\nscale float32 scalar 2\n",
       "parameter 2 is 'fc1.bias' float16 128 in group 0 here, 'fc1.bias' float32 128 in group 0 in the run"},
      {"fc1.weight float32 128x784 0\nb float32 128 0\nfc2.weight float32 10x128 1\nscale float32 scalar 2\n",
       "parameter 2 is 'b' float32 128 in group 0 here, 'fc1.bias' float32 128 in group 0 in the run"},
      {"fc1.weight float32 128x784 0\nfc1.bias float32 128 1\nfc2.weight float32 10x128 2\nscale float32 scalar 3\n",
       "parameter 2 is 'fc1.bias' float32 128 in group 1 here, 'fc1.bias' float32 128 in group 0 in the run"},
      {"fc1.weight float32 128x784 0\nfc1.bias float32 128 0\nfc2.weight float32 10x128 1\n",
       "3 parameters here, 4 in the run"},
      {"nonsense\n",
       "the node's signature is malformed: model signature line 1 'nonsense' is not 'name dtype shape group'"},
  };
  for (const auto& r : rows) EXPECT_EQ(first_signature_difference(r.node, run), r.want) << r.node;
}

TEST(ModelSignature, TheHeadAdmitsANodeWhoseModelIsTheRuns) {
  const std::string other = "fc1.weight float32 64x784 0\n";
  struct row {
    const char* example;
    const char* run_digest;
    std::string run_signature, node_digest, node_signature;
    bool refused, adopt;
  };
  const row rows[] = {
      {"mlp", "", "", "", "", false, false},  // a built-in example, a plain node
      {"torchscript", "d1", "", "d1", "", false, false},
      {"torchscript", "d1", "", "d2", "", true, false},  // another model file
      {"mlp", "", "", "", run, true, false},  // a Python node in a built-in run
      {"external", "", "", "", "", true, false},  // `atoll join` in an external run
      {"external", "", "", "", run, false, true},  // the first Python node: its model is the run's
      {"external", "", run, "", run, false, false},
      {"external", "", run, "", other, true, false},
      // A C++ node with --model: its file's digest and its module's signature.
      {"torchscript", "d1", "", "d1", run, false, false},  // the run's file: the signature is not asked for
      {"torchscript", "d1", "", "d2", run, true, false},
      {"external", "", "", "d1", run, false, true},  // the first node of an external run
      {"external", "", run, "d1", run, false, false},  // the Python nodes' model, as TorchScript
      {"external", "", run, "d1", other, true, false},
      {"external", "", "", "d1", "", true, false},  // a file whose signature is unknown
  };
  for (const auto& r : rows) {
    const auto got = check_node_model(r.example, r.run_digest, r.run_signature, r.node_digest, r.node_signature);
    EXPECT_EQ(bool(got.refusal), r.refused) << r.example << " " << r.node_signature;
    if (r.refused) {
      EXPECT_EQ(got.refusal.code, errc::model_mismatch);
    }
    EXPECT_EQ(got.adopt_signature, r.adopt) << r.example;
  }
  EXPECT_NE(check_node_model("external", "", run, "", other).refusal.message.find("parameter 1 is"), std::string::npos);
}

}  // namespace
}  // namespace atl
