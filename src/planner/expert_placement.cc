// Expert placement: contiguous ranges, or EPLB-style redundant copies and greedy packing.
#include "planner/expert_placement.h"

#include <algorithm>
#include <numeric>

#include "base/even_split.h"

namespace shoal::planner {

namespace {

Status Check(const std::vector<int64_t>& load, int members) {
  if (load.empty()) return Errorf("no experts");
  if (members < 1 || members > static_cast<int>(load.size()))
    return Errorf("{} members for {} experts", members, load.size());
  for (int64_t l : load)
    if (l < 0) return Errorf("a negative routing count");
  return Status::Ok();
}

void Finish(ExpertPlacement* p) {
  const double total = std::accumulate(p->load.begin(), p->load.end(), 0.0);
  const double mean = total / static_cast<double>(p->load.size());
  const double most = *std::max_element(p->load.begin(), p->load.end());
  p->busiest_over_mean = mean > 0 ? most / mean : 1.0;
}

}  // namespace

Result<ExpertPlacement> PlaceContiguous(const std::vector<int64_t>& load, int members) {
  SHOAL_RETURN_IF_ERROR(Check(load, members));
  ExpertPlacement p;
  p.experts.resize(static_cast<size_t>(members));
  p.load.assign(static_cast<size_t>(members), 0.0);
  for (int k = 0; k < members; ++k) {
    const Slice s = SliceOf(static_cast<int64_t>(load.size()), members, k);
    for (int64_t e = s.first; e < s.end(); ++e) {
      p.experts[static_cast<size_t>(k)].push_back(static_cast<int32_t>(e));
      p.load[static_cast<size_t>(k)] += static_cast<double>(load[static_cast<size_t>(e)]);
    }
  }
  Finish(&p);
  return p;
}

Result<ExpertPlacement> PlaceBalanced(const std::vector<int64_t>& load, int members,
                                      int redundant) {
  SHOAL_RETURN_IF_ERROR(Check(load, members));
  const int n = static_cast<int>(load.size());
  if (redundant < 0 || redundant > n * (members - 1))
    return Errorf("{} redundant copies of {} experts over {} members", redundant, n, members);
  std::vector<int> copies(static_cast<size_t>(n), 1);
  auto per_copy = [&](int e) {
    return static_cast<double>(load[static_cast<size_t>(e)]) / copies[static_cast<size_t>(e)];
  };
  for (int r = 0; r < redundant; ++r) {
    int best = -1;
    for (int e = 0; e < n; ++e)
      if (copies[static_cast<size_t>(e)] < members && (best < 0 || per_copy(e) > per_copy(best)))
        best = e;
    ++copies[static_cast<size_t>(best)];
  }
  // Every copy, heaviest first (ties: lower expert id first).
  std::vector<std::pair<double, int>> items;
  for (int e = 0; e < n; ++e)
    for (int c = 0; c < copies[static_cast<size_t>(e)]; ++c) items.push_back({per_copy(e), e});
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const size_t slots = (items.size() + static_cast<size_t>(members) - 1) / members;
  ExpertPlacement p;
  p.experts.resize(static_cast<size_t>(members));
  p.load.assign(static_cast<size_t>(members), 0.0);
  for (const auto& [w, e] : items) {
    int best = -1;
    for (int k = 0; k < members; ++k) {
      const auto& held = p.experts[static_cast<size_t>(k)];
      if (held.size() >= slots || std::find(held.begin(), held.end(), e) != held.end()) continue;
      if (best < 0 || p.load[static_cast<size_t>(k)] < p.load[static_cast<size_t>(best)]) best = k;
    }
    if (best < 0) return Errorf("no member has room for a copy of expert {}", e);
    p.experts[static_cast<size_t>(best)].push_back(e);
    p.load[static_cast<size_t>(best)] += w;
  }
  Finish(&p);
  return p;
}

}  // namespace shoal::planner
