// split_between and batch_shard: Accelerate's split_between_processes and BatchSamplerShard.
// TRAINING.md's cases and their drop_last / even_batches / split_batches variants are worked out
// by hand in each case's comment. A line-by-line port of BatchSamplerShard's Python (below, over
// torch's BatchSampler) then checks every combination of small n, batch, world and options.

#include <cohort/error.hpp>
#include <cohort/train/metrics.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using cohort::Error;
using cohort::ErrorCode;
using cohort::train::batch_shard;
using cohort::train::BatchShardOptions;
using cohort::train::split_between;
using Indices = std::vector<std::int64_t>;
using Batches = std::vector<Indices>;

Indices split(std::int64_t len, int world, int rank, bool pad = false) {
  return split_between(len, world, rank, pad).indices();
}

Batches shard(std::int64_t n, std::int64_t batch, int world, int rank,
              const BatchShardOptions& options = {}) {
  return batch_shard(n, batch, world, rank, options).batches();
}

BatchShardOptions drop_last() {
  BatchShardOptions o;
  o.drop_last = true;
  return o;
}

BatchShardOptions uneven() {
  BatchShardOptions o;
  o.even_batches = false;
  return o;
}

BatchShardOptions split_batches(bool even = true) {
  BatchShardOptions o;
  o.split_batches = true;
  o.even_batches = even;
  return o;
}

template <class F>
void require_invalid(F&& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains(needle));
    return;
  }
  FAIL("no error thrown; expected one mentioning '" << needle << "'");
}

// ---- The reference: accelerate/data_loader.py's BatchSamplerShard, transcribed statement by
// statement (Python slices clamp at the end, as the helper does), over torch's BatchSampler on a
// SequentialSampler of range(n).

Batches torch_batch_sampler(std::int64_t n, std::int64_t batch, bool drop_last) {
  Batches out;
  Indices current;
  for (std::int64_t i = 0; i < n; ++i) {
    current.push_back(i);
    if (static_cast<std::int64_t>(current.size()) == batch) {
      out.push_back(current);
      current.clear();
    }
  }
  if (!current.empty() && !drop_last) out.push_back(current);
  return out;
}

Indices py_slice(const Indices& v, std::int64_t begin, std::int64_t end) {
  const auto size = static_cast<std::int64_t>(v.size());
  begin = std::min(begin, size);
  end = std::min(end, size);
  return begin < end ? Indices(v.begin() + begin, v.begin() + end) : Indices{};
}

Batches accelerate_iter_with_split(const Batches& sampler, std::int64_t batch_size, int P, int rank,
                                   bool drop_last, bool even_batches) {
  Batches yielded;
  Indices initial_data;
  const std::int64_t batch_length = batch_size / P;
  Indices batch;
  for (std::size_t idx = 0; idx < sampler.size(); ++idx) {
    batch = sampler[idx];
    if (idx == 0) initial_data = batch;
    if (static_cast<std::int64_t>(batch.size()) == batch_size) {
      yielded.push_back(py_slice(batch, batch_length * rank, batch_length * (rank + 1)));
    }
  }
  if (!drop_last && !initial_data.empty() && static_cast<std::int64_t>(batch.size()) < batch_size) {
    if (!even_batches) {
      if (static_cast<std::int64_t>(batch.size()) > batch_length * rank) {
        yielded.push_back(py_slice(batch, batch_length * rank, batch_length * (rank + 1)));
      }
    } else {
      while (static_cast<std::int64_t>(initial_data.size()) < batch_size) {
        const Indices copy = initial_data;
        initial_data.insert(initial_data.end(), copy.begin(), copy.end());
      }
      batch.insert(batch.end(), initial_data.begin(), initial_data.end());
      yielded.push_back(py_slice(batch, batch_length * rank, batch_length * (rank + 1)));
    }
  }
  return yielded;
}

Batches accelerate_iter_with_no_split(const Batches& sampler, std::int64_t batch_size, int P,
                                      int rank, bool drop_last, bool even_batches) {
  Batches yielded;
  Indices initial_data;
  Indices batch_to_yield;
  Indices batch;
  std::int64_t idx = 0;
  for (std::size_t i = 0; i < sampler.size(); ++i) {
    idx = static_cast<std::int64_t>(i);
    batch = sampler[i];
    if (!drop_last && idx < P) initial_data.insert(initial_data.end(), batch.begin(), batch.end());
    if (idx % P == rank) batch_to_yield = batch;
    if (idx % P == P - 1 && static_cast<std::int64_t>(batch.size()) == batch_size) {
      yielded.push_back(batch_to_yield);
      batch_to_yield.clear();
    }
  }
  if (!drop_last && !initial_data.empty()) {
    if (!even_batches) {
      if (!batch_to_yield.empty()) yielded.push_back(batch_to_yield);
    } else {
      if (static_cast<std::int64_t>(batch_to_yield.size()) == batch_size) {
        yielded.push_back(batch_to_yield);
      }
      while (static_cast<std::int64_t>(initial_data.size()) < P * batch_size) {
        const Indices copy = initial_data;
        initial_data.insert(initial_data.end(), copy.begin(), copy.end());
      }
      if (static_cast<std::int64_t>(batch.size()) == batch_size) {
        batch.clear();
        idx += 1;
      }
      std::int64_t cycle_index = 0;
      while (idx % P != 0 || !batch.empty()) {
        const std::int64_t end_index =
            cycle_index + batch_size - static_cast<std::int64_t>(batch.size());
        const Indices more = py_slice(initial_data, cycle_index, end_index);
        batch.insert(batch.end(), more.begin(), more.end());
        if (idx % P == rank) yielded.push_back(batch);
        cycle_index = end_index;
        batch.clear();
        idx += 1;
      }
    }
  }
  return yielded;
}

Batches accelerate_shard(std::int64_t n, std::int64_t batch, int world, int rank,
                         const BatchShardOptions& o) {
  const Batches sampler = torch_batch_sampler(n, batch, o.drop_last);
  return o.split_batches
             ? accelerate_iter_with_split(sampler, batch, world, rank, o.drop_last, o.even_batches)
             : accelerate_iter_with_no_split(sampler, batch, world, rank, o.drop_last,
                                             o.even_batches);
}

}  // namespace

// ---- split_between

TEST_CASE("split_between: 3 items on 2 ranks are [A,B] and [C], padded [C,C]",
          "[train][sharding]") {
  // per, extra = divmod(3, 2) = 1, 1: rank 0 [0, 2), rank 1 [2, 3); padded to 1 + 1 = 2 items
  // by repeating item 2, the last of the input.
  CHECK(split(3, 2, 0) == Indices{0, 1});
  CHECK(split(3, 2, 1) == Indices{2});
  CHECK(split(3, 2, 0, true) == Indices{0, 1});
  CHECK(split(3, 2, 1, true) == Indices{2, 2});
}

TEST_CASE("split_between: 2 items on 3 ranks are [0], [1], [] (padded [1])", "[train][sharding]") {
  // per, extra = 0, 2: ranks 0 and 1 get one item each, rank 2 starts at 2 = len and gets
  // nothing (Accelerate would hand it item 1 even unpadded). Padded: every rank to 0 + 1 items.
  CHECK(split(2, 3, 0) == Indices{0});
  CHECK(split(2, 3, 1) == Indices{1});
  CHECK(split(2, 3, 2).empty());
  CHECK(split(2, 3, 0, true) == Indices{0});
  CHECK(split(2, 3, 1, true) == Indices{1});
  CHECK(split(2, 3, 2, true) == Indices{1});
  const auto range = split_between(2, 3, 2, true);
  CHECK(range.begin == 2);
  CHECK(range.end == 2);
  CHECK(range.padding == 1);
  CHECK(range.pad_item == 1);
  CHECK(range.size() == 1);
}

TEST_CASE("split_between: 7 items on 3 ranks are [0,3), [3,5), [5,7)", "[train][sharding]") {
  // per, extra = 2, 1: rank 0 gets 3 from 0, rank 1 gets 2 from 3, rank 2 gets 2 from 5.
  CHECK(split_between(7, 3, 0).begin == 0);
  CHECK(split_between(7, 3, 0).end == 3);
  CHECK(split_between(7, 3, 1).begin == 3);
  CHECK(split_between(7, 3, 1).end == 5);
  CHECK(split_between(7, 3, 2).begin == 5);
  CHECK(split_between(7, 3, 2).end == 7);
  // Padded to 3 items each with item 6, the last of the whole input (not the rank's own last).
  CHECK(split(7, 3, 0, true) == Indices{0, 1, 2});
  CHECK(split(7, 3, 1, true) == Indices{3, 4, 6});
  CHECK(split(7, 3, 2, true) == Indices{5, 6, 6});
}

TEST_CASE("split_between: even splits, a world of one and no items are not padded",
          "[train][sharding]") {
  // 4 on 2: per 2, extra 0, so the padded size is 2 (some Accelerate versions pad to per + 1).
  CHECK(split(4, 2, 1, true) == Indices{2, 3});
  CHECK(split(5, 1, 0, true) == Indices{0, 1, 2, 3, 4});
  CHECK(split(0, 3, 1, true).empty());
  CHECK(split(0, 1, 0).empty());
}

TEST_CASE("split_between: every item exactly once, in order, for len 0..20 and world 1..5",
          "[train][sharding]") {
  for (std::int64_t len = 0; len <= 20; ++len) {
    for (int world = 1; world <= 5; ++world) {
      Indices all;
      std::int64_t largest = 0;
      for (int rank = 0; rank < world; ++rank) {
        const Indices mine = split(len, world, rank);
        all.insert(all.end(), mine.begin(), mine.end());
        largest = std::max<std::int64_t>(largest, static_cast<std::int64_t>(mine.size()));
      }
      Indices want;
      for (std::int64_t i = 0; i < len; ++i) want.push_back(i);
      INFO("len " << len << ", world " << world);
      CHECK(all == want);
      for (int rank = 0; rank < world; ++rank) {
        CHECK(split_between(len, world, rank, true).size() == largest);
      }
    }
  }
}

TEST_CASE("split_between: bad arguments name the value", "[train][sharding]") {
  require_invalid([] { split_between(-1, 2, 0); }, "item count -1");
  require_invalid([] { split_between(3, 0, 0); }, "world size 0");
  require_invalid([] { split_between(3, 2, 2); }, "rank 2 is out of range for a world of 2");
  require_invalid([] { split_between(3, 2, -1); }, "rank -1");
}

// ---- batch_shard

TEST_CASE("batch_shard: n=10, batch 2, world 3 wraps the last round to the start",
          "[train][sharding]") {
  // Batches [0,1] [2,3] [4,5] | [6,7] [8,9] [..]: rank 2's second batch wraps to [0,1].
  CHECK(shard(10, 2, 3, 0) == Batches{{0, 1}, {6, 7}});
  CHECK(shard(10, 2, 3, 1) == Batches{{2, 3}, {8, 9}});
  CHECK(shard(10, 2, 3, 2) == Batches{{4, 5}, {0, 1}});
  // 10 mod (2 · 3) = 4: the last gather keeps [6,7,8,9].
  CHECK(batch_shard(10, 2, 3, 0).remainder() == 4);
  CHECK(batch_shard(10, 2, 3, 2).rounds() == 2);
}

TEST_CASE("batch_shard: n=10, batch 2, world 3 variants", "[train][sharding]") {
  // drop_last: only the first round is complete.
  CHECK(shard(10, 2, 3, 0, drop_last()) == Batches{{0, 1}});
  CHECK(shard(10, 2, 3, 1, drop_last()) == Batches{{2, 3}});
  CHECK(shard(10, 2, 3, 2, drop_last()) == Batches{{4, 5}});
  CHECK(batch_shard(10, 2, 3, 0, drop_last()).rounds() == 1);
  CHECK(batch_shard(10, 2, 3, 0, drop_last()).remainder() == 0);
  // even_batches off: the data runs out before rank 2's second batch; it still has 2 rounds,
  // the second one empty (it must still join the last gather).
  CHECK(shard(10, 2, 3, 0, uneven()) == Batches{{0, 1}, {6, 7}});
  CHECK(shard(10, 2, 3, 1, uneven()) == Batches{{2, 3}, {8, 9}});
  CHECK(shard(10, 2, 3, 2, uneven()) == Batches{{4, 5}});
  CHECK(batch_shard(10, 2, 3, 2, uneven()).rounds() == 2);
  CHECK(batch_shard(10, 2, 3, 2, uneven()).batch(1).empty());
  CHECK(batch_shard(10, 2, 3, 2, uneven()).remainder() == 4);
  // split_batches, global batch 6 split in 3 slices of 2: batches [0..5], [6..9]; the second is
  // topped up with the first, [6,7,8,9,0,1], so the slices are the same as above.
  CHECK(shard(10, 6, 3, 0, split_batches()) == Batches{{0, 1}, {6, 7}});
  CHECK(shard(10, 6, 3, 1, split_batches()) == Batches{{2, 3}, {8, 9}});
  CHECK(shard(10, 6, 3, 2, split_batches()) == Batches{{4, 5}, {0, 1}});
  CHECK(batch_shard(10, 6, 3, 2, split_batches()).remainder() == 4);
  // split_batches without even batches: rank 2's slice [4, 6) of [6,7,8,9] is empty.
  CHECK(shard(10, 6, 3, 2, split_batches(false)) == Batches{{4, 5}});
  // split_batches with drop_last: the short batch [6..9] is dropped.
  BatchShardOptions split_drop = split_batches();
  split_drop.drop_last = true;
  CHECK(shard(10, 6, 3, 1, split_drop) == Batches{{2, 3}});
}

TEST_CASE("batch_shard: n=9, batch 5, world 2 is [0..4] and [5,6,7,8,0]", "[train][sharding]") {
  CHECK(shard(9, 5, 2, 0) == Batches{{0, 1, 2, 3, 4}});
  CHECK(shard(9, 5, 2, 1) == Batches{{5, 6, 7, 8, 0}});
  // 9 mod 10 = 9: the gather keeps [0..8] and drops the repeated 0.
  CHECK(batch_shard(9, 5, 2, 1).remainder() == 9);
  // Without even batches rank 1's batch is short; with drop_last nobody has a complete round.
  CHECK(shard(9, 5, 2, 1, uneven()) == Batches{{5, 6, 7, 8}});
  CHECK(shard(9, 5, 2, 0, drop_last()).empty());
  CHECK(shard(9, 5, 2, 1, drop_last()).empty());
  CHECK(batch_shard(9, 5, 2, 1, drop_last()).rounds() == 0);
}

TEST_CASE("batch_shard: fewer samples than a round repeat the data", "[train][sharding]") {
  // n=3, batch 2, world 3: positions 3, 4, 5 read (j - 3) mod 3 = 0, 1, 2.
  CHECK(shard(3, 2, 3, 0) == Batches{{0, 1}});
  CHECK(shard(3, 2, 3, 1) == Batches{{2, 0}});
  CHECK(shard(3, 2, 3, 2) == Batches{{1, 2}});
  // n=1, batch 3, world 2: the single sample fills both batches.
  CHECK(shard(1, 3, 2, 1) == Batches{{0, 0, 0}});
  // No samples: no rounds at all.
  CHECK(batch_shard(0, 4, 3, 1).rounds() == 0);
  CHECK(batch_shard(0, 4, 3, 1).remainder() == 0);
}

TEST_CASE("batch_shard matches Accelerate's BatchSamplerShard for n 0..40, batch 1..6, world 1..5",
          "[train][sharding]") {
  for (int flags = 0; flags < 8; ++flags) {
    BatchShardOptions o;
    o.drop_last = (flags & 1) != 0;
    o.even_batches = (flags & 2) != 0;
    o.split_batches = (flags & 4) != 0;
    for (int world = 1; world <= 5; ++world) {
      for (std::int64_t batch = 1; batch <= 6; ++batch) {
        const std::int64_t b = o.split_batches ? batch * world : batch;  // divisible by world
        for (std::int64_t n = 0; n <= 40; ++n) {
          std::int64_t rounds = -1;
          for (int rank = 0; rank < world; ++rank) {
            INFO("n " << n << ", batch " << b << ", world " << world << ", rank " << rank
                      << ", drop_last " << o.drop_last << ", even " << o.even_batches << ", split "
                      << o.split_batches);
            const auto mine = batch_shard(n, b, world, rank, o);
            REQUIRE(mine.batches() == accelerate_shard(n, b, world, rank, o));
            // Every rank has the same number of rounds.
            if (rank == 0) rounds = mine.rounds();
            REQUIRE(mine.rounds() == rounds);
          }
        }
      }
    }
  }
}

TEST_CASE("batch_shard: the last gathered round truncated to remainder() is the tail of the data",
          "[train][sharding]") {
  for (int world = 1; world <= 5; ++world) {
    for (std::int64_t batch = 1; batch <= 4; ++batch) {
      for (std::int64_t n = 1; n <= 30; ++n) {
        for (bool even : {true, false}) {
          BatchShardOptions o;
          o.even_batches = even;
          // What gather_for_metrics sees: every rank's batches in round order, rank order.
          Indices seen;
          const std::int64_t rounds = batch_shard(n, batch, world, 0, o).rounds();
          for (std::int64_t round = 0; round < rounds; ++round) {
            Indices gathered;
            for (int rank = 0; rank < world; ++rank) {
              const Indices b = batch_shard(n, batch, world, rank, o).batch(round);
              gathered.insert(gathered.end(), b.begin(), b.end());
            }
            const std::int64_t remainder = batch_shard(n, batch, world, 0, o).remainder();
            if (round + 1 == rounds && remainder > 0) gathered.resize(remainder);
            seen.insert(seen.end(), gathered.begin(), gathered.end());
          }
          Indices want;
          for (std::int64_t i = 0; i < n; ++i) want.push_back(i);
          INFO("n " << n << ", batch " << batch << ", world " << world << ", even " << even);
          REQUIRE(seen == want);
        }
      }
    }
  }
}

TEST_CASE("batch_shard: bad arguments name the value", "[train][sharding]") {
  require_invalid([] { batch_shard(-3, 2, 2, 0); }, "sample count -3");
  require_invalid([] { batch_shard(10, 0, 2, 0); }, "batch size 0");
  require_invalid([] { batch_shard(10, 2, 0, 0); }, "world size 0");
  require_invalid([] { batch_shard(10, 2, 3, 3); }, "rank 3 is out of range for a world of 3");
  require_invalid([] { batch_shard(10, 5, 2, 0, split_batches()); },
                  "batch size 5 must be a multiple of the world size 2");
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;
  require_invalid([&] { batch_shard(10, huge, 3, 0); }, "overflows int64");
  require_invalid([&] { batch_shard(std::numeric_limits<std::int64_t>::max(), 2, 2, 0); },
                  "overflows int64");
  const auto two_rounds = batch_shard(10, 2, 3, 0);
  require_invalid([&] { two_rounds.batch(2); }, "round 2 is out of range; this shard has 2");
  require_invalid([&] { two_rounds.batch(-1); }, "round -1");
}
