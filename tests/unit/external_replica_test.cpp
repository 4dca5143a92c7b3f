// The replica of a user's own loop (training/external_replica.hpp): the user's thread and
// the worker's take turns at each step boundary, and the worker reads and writes the
// user's tensors in place.
#include "training/external_replica.hpp"

#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/core/model_signature.hpp"
#include "training/fragment_tensors.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

TEST(StepTurns, TheWorkerSeesEachUserStepOnceAndTheUserWaitsForTheWorkersBoundary) {
  step_turns turns;
  std::atomic<int> boundary_work{0};  // what the worker did between steps, seen by the user
  std::thread worker([&] {
    for (int s = 0; s < 5; ++s) {
      const auto step = turns.wait_for_user_step();
      ASSERT_TRUE(step);
      EXPECT_EQ(step->loss, static_cast<float>(s));
      EXPECT_EQ(step->samples, 10);
      boundary_work = s + 1;  // e.g. a merge into the user's tensors
    }
    turns.finish();
  });
  for (int s = 0; s < 5; ++s) {
    ASSERT_EQ(turns.wait_for_worker(), step_turns::turn::go);
    EXPECT_EQ(boundary_work.load(), s);  // the worker's work of the last boundary is done
    turns.hand_over({static_cast<float>(s), 10, std::nullopt});
  }
  EXPECT_EQ(turns.wait_for_worker(), step_turns::turn::done);
  EXPECT_EQ(boundary_work.load(), 5);
  EXPECT_EQ(turns.steps_handed_over(), 5);
  worker.join();
}

TEST(StepTurns, AUserWhoLeavesReleasesAWaitingWorker) {
  step_turns turns;
  std::optional<step_turns::user_step> got = step_turns::user_step{};
  std::thread worker([&] { got = turns.wait_for_user_step(); });
  ASSERT_EQ(turns.wait_for_worker(), step_turns::turn::go);
  turns.close();
  worker.join();
  EXPECT_FALSE(got);
  EXPECT_TRUE(turns.finished());
  EXPECT_EQ(turns.wait_for_worker(), step_turns::turn::done);
}

// atoll.ElasticSampler's hand-over: the worker offers each step's units before it waits for
// the step; the user takes them before its forward. A second take before the step is handed
// over is asked_ahead (it would wait for ever); after the worker's last step, done.
TEST(StepTurns, EachStepsUnitsAreTakenBeforeItAndAskingAheadIsToldAtOnce) {
  step_turns turns;
  std::thread worker([&] {
    for (std::uint64_t s = 0; s < 3; ++s) {
      turns.offer_units({2 * s, 2 * s + 1});
      ASSERT_TRUE(turns.wait_for_user_step());
    }
    turns.finish();
  });
  std::vector<std::uint64_t> units;
  for (std::uint64_t s = 0; s < 3; ++s) {
    ASSERT_EQ(turns.take_units(units), step_turns::units_turn::ready);
    EXPECT_EQ(units, (std::vector<std::uint64_t>{2 * s, 2 * s + 1}));
    ASSERT_EQ(turns.wait_for_worker(), step_turns::turn::go);
    if (s == 1) {
      EXPECT_EQ(turns.take_units(units), step_turns::units_turn::asked_ahead);
    }
    turns.hand_over({0.0f, 2, std::nullopt});
  }
  EXPECT_EQ(turns.take_units(units), step_turns::units_turn::done);
  worker.join();
}

std::shared_ptr<external_model> two_layer_model() {
  auto model = std::make_shared<external_model>();
  model->groups = {{torch::ones({3, 2}), torch::zeros({3})}, {torch::full({2}, 2.0f)}};
  model->names = {{"fc1.weight", "fc1.bias"}, {"fc2.bias"}};
  return model;
}

TEST(ExternalReplica, ReadsAndWritesTheUsersTensorsInPlace) {
  auto model = two_layer_model();
  run_config cfg;
  cfg.fragments = 2;
  auto r = external_replica_factory(model)(cfg, replica_spec{});
  ASSERT_EQ(r->fragment_count(), 2u);
  EXPECT_EQ(r->fragment_size(0), 9u);
  EXPECT_EQ(r->fragment_size(1), 2u);
  std::vector<float> values(9);
  r->read_fragment(0, values.data());
  EXPECT_EQ(values, (std::vector<float>{1, 1, 1, 1, 1, 1, 0, 0, 0}));
  const auto weight = model->groups[0][0];
  const void* storage = weight.data_ptr();
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  r->write_fragment(0, values.data());
  EXPECT_EQ(weight.data_ptr(), storage);  // the same tensor, written in place
  EXPECT_EQ(weight[2][1].item<float>(), 5.0f);
  EXPECT_EQ(model->groups[0][1][2].item<float>(), 8.0f);
  EXPECT_FALSE(r->evaluates());  // the held-out loss is the user's
  EXPECT_TRUE(std::isnan(r->evaluate_global()));
}

TEST(ExternalReplica, ATrainStepIsTheUsersHandedOverStep) {
  auto model = two_layer_model();
  run_config cfg;
  cfg.fragments = 1;
  auto r = external_replica_factory(model)(cfg, replica_spec{});
  std::thread user([&] {
    ASSERT_EQ(model->turns.wait_for_worker(), step_turns::turn::go);
    model->turns.hand_over({0.25f, 32, 0.5f});
  });
  const auto step = r->train_step(0);
  user.join();
  EXPECT_EQ(step.loss, 0.25f);
  EXPECT_EQ(step.tokens, 32);
  EXPECT_EQ(step.held_out, 0.5f);  // the user's own evaluation, for the worker to report
  EXPECT_FALSE(r->finish_queued_step());
  EXPECT_EQ(model->turns.wait_for_worker(), step_turns::turn::done);  // the worker's steps are over
}

TEST(ExternalReplica, AtTheEndTheUsersModelIsThetaGlobal) {
  auto model = two_layer_model();
  run_config cfg;
  cfg.fragments = 2;
  auto r = external_replica_factory(model)(cfg, replica_spec{});
  const std::vector<float> global = {7.0f, 8.0f};
  r->adopt_global(1, global.data());
  model->groups[1][0].fill_(-1.0f);  // the user trained on after the last sync of fragment 1
  r->finish_queued_step();
  EXPECT_EQ(model->groups[1][0][0].item<float>(), 7.0f);
  EXPECT_EQ(model->groups[1][0][1].item<float>(), 8.0f);
  EXPECT_EQ(model->groups[0][0][0][0].item<float>(), 1.0f);  // fragment 0 never synced: the local one stands
}

TEST(FragmentTensors, EachGroupGoesToTheFragmentItsAssignmentSays) {
  struct row {
    const char* assignment;
    int fragments;
    std::size_t groups;
    std::vector<std::size_t> fragment_of_each_group;
  };
  const std::vector<row> table = {
      {"strided", 2, 5, {0, 1, 0, 1, 0}},          {"sequential", 2, 5, {0, 0, 0, 1, 1}}, {"strided", 3, 3, {0, 1, 2}},
      {"sequential", 3, 7, {0, 0, 0, 1, 1, 2, 2}}, {"sequential", 1, 3, {0, 0, 0}},
  };
  for (const auto& t : table) {
    run_config cfg;
    cfg.assignment = t.assignment;
    cfg.fragments = t.fragments;
    std::vector<std::vector<torch::Tensor>> groups;
    for (std::size_t g = 0; g < t.groups; ++g) groups.push_back({torch::full({1}, static_cast<float>(g))});
    const auto fragments = assign_fragments(groups, cfg);
    for (std::size_t g = 0; g < t.groups; ++g) {
      const std::size_t f = fragment_of_group(g, t.groups, cfg);
      EXPECT_EQ(f, t.fragment_of_each_group[g]) << t.assignment << " P=" << t.fragments << " group " << g;
      bool placed = false;  // assign_fragments put the group's tensor in that fragment
      for (const auto& p : fragments.at(f)) placed = placed || p.item<float>() == static_cast<float>(g);
      EXPECT_TRUE(placed) << t.assignment << " group " << g;
    }
  }
}

TEST(ExternalReplica, RecordsWhichGroupsTheWorkerWroteUntilTheUserTakesThem) {
  auto model = std::make_shared<external_model>();
  model->groups = {{torch::zeros({2})}, {torch::zeros({1})}, {torch::zeros({3})}};
  model->names = {{"a.w"}, {"b.w"}, {"c.w"}};
  run_config cfg;
  cfg.fragments = 2;  // strided: groups 0 and 2 make fragment 0, group 1 fragment 1
  auto r = external_replica_factory(model)(cfg, replica_spec{});
  EXPECT_TRUE(model->written.take().empty());
  std::vector<float> values(5, 1.0f);
  r->read_fragment(0, values.data());  // reading writes nothing
  EXPECT_TRUE(model->written.take().empty());
  r->write_fragment(0, values.data());
  EXPECT_EQ(model->written.take(), (std::vector<std::size_t>{0, 2}));
  EXPECT_TRUE(model->written.take().empty());  // taken once
  r->write_fragment(1, values.data());
  r->write_fragment(0, values.data());
  EXPECT_EQ(model->written.take(), (std::vector<std::size_t>{0, 1, 2}));
}

TEST(ExternalReplica, AnExportIsAStateDictShapedAndGroupedAsTheSignatureSays) {
  const std::string signature = "fc1.weight float32 3x2 0\nfc1.bias float32 3 0\nfc2.bias float32 2 1\n";
  run_config cfg;
  cfg.fragments = 2;
  const std::vector<std::vector<float>> theta = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11}};
  const std::string path = ::testing::TempDir() + "/external-export.pt";
  ASSERT_FALSE(export_external_model(cfg, signature, theta, path));
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto state = torch::pickle_load(bytes).toGenericDict();
  EXPECT_EQ(state.size(), 3u);
  const auto weight = state.at("fc1.weight").toTensor();
  EXPECT_EQ(weight.sizes().vec(), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(weight[2][1].item<float>(), 6.0f);
  EXPECT_EQ(state.at("fc1.bias").toTensor()[0].item<float>(), 7.0f);
  EXPECT_EQ(state.at("fc2.bias").toTensor()[1].item<float>(), 11.0f);
  // Fragments that do not fit the signature, and a run no node has joined yet.
  EXPECT_EQ(export_external_model(cfg, signature, {{1, 2}, {10, 11}}, path).code, errc::tensor_mismatch);
  EXPECT_EQ(export_external_model(cfg, signature, {theta[0]}, path).code, errc::tensor_mismatch);
  EXPECT_EQ(export_external_model(cfg, "", theta, path).code, errc::not_ready);
}

TEST(ExternalReplica, TheSignatureNamesEachParameterAndRefusesWhatCannotBeSyncedInPlace) {
  auto model = two_layer_model();
  EXPECT_EQ(signature_of(*model), "fc1.weight float32 3x2 0\nfc1.bias float32 3 0\nfc2.bias float32 2 1\n");
  EXPECT_FALSE(check_external_model(*model));
  model->groups[1][0] = torch::zeros({2}, torch::kFloat16);
  EXPECT_EQ(check_external_model(*model).code, errc::invalid_config);
  model->groups[1][0] = torch::zeros({2, 2}).t();  // not contiguous
  EXPECT_EQ(check_external_model(*model).code, errc::invalid_config);
  model->groups[1][0] = torch::zeros({2});
  model->names[1][0] = "has space";
  EXPECT_EQ(check_external_model(*model).code, errc::invalid_config);
  model->names[1].clear();
  EXPECT_EQ(check_external_model(*model).code, errc::invalid_config);
}

}  // namespace
}  // namespace atl
