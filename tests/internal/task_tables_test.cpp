// Task tables (the data the megakernel executes) round-trip through their cached binary form, and a damaged
// blob is refused, never handed to the device; the generated kernel dispatches exactly the ops it needs.
#include <gtest/gtest.h>

#include <cstring>

#include "codegen/kernel_source.hpp"
#include "core/error.hpp"
#include "lower/task_graph.hpp"
#include "test_models.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/task_tables.hpp"

namespace weft {
namespace {

TaskTables small_tables(int32_t queues) {
  const Graph g = build_decoder_graph(test::tiny_decoder(1, 2, 16));
  TaskGraph tg = lower(g, SymbolValues{2}, LowerOptions{queues});
  plan_memory(g, tg);
  finalize_events(tg);
  return build_task_tables(tg, schedule_static(tg, queues), static_cast<int32_t>(g.tensors().size()));
}

TEST(TaskTables, RoundTrip) {
  const TaskTables t = small_tables(7);
  ASSERT_EQ(t.num_queues(), 7);
  const std::string blob = serialize_task_tables(t);
  const TaskTables back = parse_task_tables(blob);
  EXPECT_EQ(serialize_task_tables(back), blob);
  EXPECT_EQ(back.tasks.size(), t.tasks.size());
  EXPECT_EQ(back.num_events, t.num_events);
  EXPECT_EQ(back.queue_tasks.size(), t.tasks.size()) << "every task is in exactly one queue";
}

TEST(TaskTables, DamagedBlobsAreRefused) {
  const std::string blob = serialize_task_tables(small_tables(3));
  auto refused = [](const std::string& b) {
    try {
      parse_task_tables(b);
      return false;
    } catch (const Error& e) {
      return e.status() == Status::cache;
    }
  };
  EXPECT_TRUE(refused(blob.substr(0, blob.size() / 2)));
  EXPECT_TRUE(refused(blob + "x"));
  EXPECT_TRUE(refused(""));
  std::string bad_magic = blob;
  bad_magic[0] ^= 1;
  EXPECT_TRUE(refused(bad_magic));
  // A wait that names an event past the end: header (10 words) + tasks, then the first wait's event.
  TaskTables t = parse_task_tables(blob);
  ASSERT_FALSE(t.waits.empty());
  t.waits[0].event = t.num_events + 5;
  EXPECT_TRUE(refused(serialize_task_tables(t)));
  t = parse_task_tables(blob);
  t.tasks[0].args.in[0] = t.num_slots;
  EXPECT_TRUE(refused(serialize_task_tables(t)));
  // An attention task's rope table slot (d13: -1 or a slot) past the slots, or below -1.
  for (const int64_t bad : {int64_t{t.num_slots}, int64_t{-2}}) {
    t = parse_task_tables(blob);
    int attention = -1;
    for (size_t i = 0; i < t.tasks.size() && attention < 0; ++i)
      if (t.tasks[i].op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) attention = static_cast<int>(i);
    ASSERT_GE(attention, 0);
    EXPECT_FALSE(refused(serialize_task_tables(t))) << "the table as built";
    t.tasks[static_cast<size_t>(attention)].args.d[13] = bad;
    EXPECT_TRUE(refused(serialize_task_tables(t))) << "d13 = " << bad;
  }
  t = parse_task_tables(blob);
  t.queue_tasks[0] = static_cast<int32_t>(t.tasks.size());
  EXPECT_TRUE(refused(serialize_task_tables(t)));
  t = parse_task_tables(blob);
  t.tasks[1].wait_count = 1 << 30;
  EXPECT_TRUE(refused(serialize_task_tables(t)));
}

TEST(KernelSource, HandsTheLaunchToTheTaskLoop) {
  const std::string src = generate_megakernel_source(12);
  EXPECT_NE(src.find("weft_dev_run_queues(&q);"), std::string::npos) << src;
  EXPECT_NE(src.find("q.num_slots = WEFT_NUM_SLOTS;"), std::string::npos) << src;
  EXPECT_NE(src.find(kMegakernelName), std::string::npos);
  EXPECT_NE(src.find("#define WEFT_NUM_SLOTS 12\n"), std::string::npos);
  EXPECT_STREQ(dev_op_function(WEFT_DEV_OP_LINEAR), "weft_dev_linear");
  EXPECT_THROW(dev_op_function(WEFT_DEV_OP_COUNT), Error);
  // The code generator's version (in the cache key) is a hash of what it generates.
  EXPECT_EQ(codegen_version().size(), 16u);
  EXPECT_EQ(codegen_version(), codegen_version());
  EXPECT_THROW(generate_megakernel_source(kMaxSlots + 1), Error);
  EXPECT_THROW(generate_megakernel_source(0), Error);
}

}  // namespace
}  // namespace weft
