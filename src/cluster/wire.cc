// Encoding and decoding of the pipeline's message bodies (little-endian via net::ByteWriter).
#include "cluster/wire.h"

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "net/bytes.h"
#include "net/conn.h"

namespace shoal::cluster {

namespace {

using net::ByteReader;
using net::ByteWriter;

void PutCopies(ByteWriter& w, const std::vector<BlockCopy>& v) {
  w.U32(static_cast<uint32_t>(v.size()));
  for (const BlockCopy& c : v) {
    w.U32(static_cast<uint32_t>(c.src));
    w.U32(static_cast<uint32_t>(c.dst));
  }
}

Status GetCopies(ByteReader& r, std::vector<BlockCopy>* v) {
  uint32_t n = 0;
  SHOAL_RETURN_IF_ERROR(r.Count(&n, kMaxCopies, 8, "block copies"));
  v->resize(n);
  for (BlockCopy& c : *v) {
    uint32_t s = 0, d = 0;
    SHOAL_RETURN_IF_ERROR(r.U32(&s, "copy src"));
    SHOAL_RETURN_IF_ERROR(r.U32(&d, "copy dst"));
    if (s >= kMaxBlocks || d >= kMaxBlocks) return Errorf("block copy out of range");
    c.src = static_cast<int32_t>(s);
    c.dst = static_cast<int32_t>(d);
  }
  return Status::Ok();
}

}  // namespace

std::vector<uint8_t> EncodeJoin(const std::string& json) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U8(static_cast<uint8_t>(ControlType::kJoin));
  w.String(json);
  return out;
}

std::vector<uint8_t> EncodeAssign(const Assignment& a) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U8(static_cast<uint8_t>(ControlType::kAssign));
  w.U32(a.epoch);
  w.String(a.model_file);
  w.U32(static_cast<uint32_t>(a.first_layer));
  w.U32(static_cast<uint32_t>(a.last_layer));
  w.U32(static_cast<uint32_t>(a.n_blocks));
  w.U32(static_cast<uint32_t>(a.swap_blocks));
  const planner::PlanConfig& c = a.config;
  w.U32(static_cast<uint32_t>(c.max_num_seqs));
  w.U32(static_cast<uint32_t>(c.max_model_len));
  w.U32(static_cast<uint32_t>(c.block_size));
  w.U32(static_cast<uint32_t>(c.kv_dtype));
  w.U32(static_cast<uint32_t>(c.max_batched_tokens));
  w.U8(static_cast<uint8_t>(c.link_dtype));
  w.U32(static_cast<uint32_t>(a.next_nodes.size()));
  for (const std::string& n : a.next_nodes) w.String(n);
  w.U32(static_cast<uint32_t>(a.tp_rank));
  w.U32(static_cast<uint32_t>(a.tp_peers.size()));
  for (const std::string& n : a.tp_peers) w.String(n);
  w.U8(a.tp_fast ? 1 : 0);
  PutManifest(w, a.manifest);
  return out;
}

Result<std::pair<std::string, uint16_t>> NodeAddress(const std::string& s) {
  SHOAL_ASSIGN_OR_RETURN(auto hp, net::ParseHostPort(s));
  if (hp.second == 0) return Errorf("bad port in '{}'", s);
  return hp;
}

std::vector<uint8_t> EncodeGroupJoin(uint32_t epoch, int32_t rank) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U8(static_cast<uint8_t>(ControlType::kGroupJoin));
  w.U32(epoch);
  w.U32(static_cast<uint32_t>(rank));
  return out;
}

Result<std::pair<uint32_t, int32_t>> DecodeGroupJoin(std::span<const uint8_t> payload) {
  ByteReader r(payload.subspan(1));
  uint32_t epoch = 0, rank = 0;
  SHOAL_RETURN_IF_ERROR(r.U32(&epoch, "epoch"));
  SHOAL_RETURN_IF_ERROR(r.U32(&rank, "member index"));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd("group join"));
  if (rank >= kMaxGroupNodes) return Errorf("member index {} out of range", rank);
  return std::make_pair(epoch, static_cast<int32_t>(rank));
}

std::vector<uint8_t> EncodeAssignResult(bool ok, const std::string& message) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U8(static_cast<uint8_t>(ControlType::kAssignResult));
  w.U8(ok ? 1 : 0);
  w.String(message);
  return out;
}

Result<ControlType> ControlTypeOf(std::span<const uint8_t> payload) {
  if (payload.empty()) return Errorf("empty control message");
  const uint8_t t = payload[0];
  if (t < 1 || t > 7) return Errorf("unknown control message type {}", t);
  return static_cast<ControlType>(t);
}

Result<std::string> DecodeJoin(std::span<const uint8_t> payload) {
  ByteReader r(payload.subspan(1));
  std::string s;
  SHOAL_RETURN_IF_ERROR(r.String(&s, 1 << 16, "node info"));
  return s;
}

Result<Assignment> DecodeAssign(std::span<const uint8_t> payload) {
  ByteReader r(payload.subspan(1));
  Assignment a;
  uint32_t v[10] = {};
  SHOAL_RETURN_IF_ERROR(r.U32(&a.epoch, "epoch"));
  SHOAL_RETURN_IF_ERROR(r.String(&a.model_file, 4096, "model file"));
  for (int i = 0; i < 9; ++i) SHOAL_RETURN_IF_ERROR(r.U32(&v[i], "assignment field"));
  uint8_t link = 0;
  SHOAL_RETURN_IF_ERROR(r.U8(&link, "link dtype"));
  auto addresses = [&r](std::vector<std::string>* out, const char* what) -> Status {
    uint32_t n = 0;
    SHOAL_RETURN_IF_ERROR(r.U32(&n, what));
    if (n > kMaxGroupNodes) return Errorf("{}: {} nodes, at most {}", what, n, kMaxGroupNodes);
    out->resize(n);
    for (std::string& s : *out) {
      SHOAL_RETURN_IF_ERROR(r.String(&s, 1024, what));
      SHOAL_RETURN_IF_ERROR(NodeAddress(s).status().Annotate(what));
    }
    return Status::Ok();
  };
  SHOAL_RETURN_IF_ERROR(addresses(&a.next_nodes, "next stage"));
  uint32_t rank = 0;
  SHOAL_RETURN_IF_ERROR(r.U32(&rank, "member index"));
  SHOAL_RETURN_IF_ERROR(addresses(&a.tp_peers, "group members"));
  if (a.tp_peers.size() == 1) return Errorf("a group of one member");
  if (rank >= static_cast<uint32_t>(a.tp_size()))
    return Errorf("member {} of a group of {}", rank, a.tp_size());
  a.tp_rank = static_cast<int32_t>(rank);
  uint8_t fast = 0;
  SHOAL_RETURN_IF_ERROR(r.U8(&fast, "tp mode"));
  if (fast > 1) return Errorf("unknown tensor-parallel mode {}", fast);
  a.tp_fast = fast == 1;
  SHOAL_RETURN_IF_ERROR(GetManifest(r, &a.manifest));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd("assignment"));
  for (int i = 0; i < 9; ++i)
    if (v[i] > (1u << 30)) return Errorf("assignment field {} out of range", i);
  a.first_layer = static_cast<int32_t>(v[0]);
  a.last_layer = static_cast<int32_t>(v[1]);
  a.n_blocks = static_cast<int32_t>(v[2]);
  a.swap_blocks = static_cast<int32_t>(v[3]);
  a.config.max_num_seqs = static_cast<int32_t>(v[4]);
  a.config.max_model_len = static_cast<int32_t>(v[5]);
  a.config.block_size = static_cast<int32_t>(v[6]);
  a.config.kv_dtype = static_cast<DType>(v[7]);
  a.config.max_batched_tokens = static_cast<int32_t>(v[8]);
  if (link > 2) return Errorf("unknown link dtype {}", link);
  a.config.link_dtype = static_cast<planner::LinkDType>(link);
  if (a.first_layer >= a.last_layer) return Errorf("empty layer range");
  return a;
}

Status DecodeAssignResult(std::span<const uint8_t> payload) {
  ByteReader r(payload.subspan(1));
  uint8_t ok = 0;
  std::string msg;
  SHOAL_RETURN_IF_ERROR(r.U8(&ok, "ok"));
  SHOAL_RETURN_IF_ERROR(r.String(&msg, 1 << 16, "message"));
  if (!ok) return Errorf("{}", msg);
  return Status::Ok();
}

std::vector<uint8_t> EncodeHeartbeatReply(const ProcessMemory& m, const NodeLoad& load) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U64(m.rss_bytes);
  w.U64(m.peak_rss_bytes);
  for (uint64_t v : {load.tokens, load.busy_ns, load.collective_ns, load.collective_calls,
                     load.collective_bytes_in})
    w.U64(v);
  return out;
}

Result<HeartbeatReply> DecodeHeartbeatReply(std::span<const uint8_t> payload) {
  if (payload.size() != 16 && payload.size() != 56)
    return Errorf("heartbeat answer of {} bytes, want 16 (RSS, peak RSS) or 56 (and the load)",
                  payload.size());
  ByteReader r(payload);
  HeartbeatReply h;
  SHOAL_RETURN_IF_ERROR(r.U64(&h.mem.rss_bytes, "rss"));
  SHOAL_RETURN_IF_ERROR(r.U64(&h.mem.peak_rss_bytes, "peak rss"));
  if (payload.size() == 16) return h;
  NodeLoad& l = h.load;
  for (uint64_t* v :
       {&l.tokens, &l.busy_ns, &l.collective_ns, &l.collective_calls, &l.collective_bytes_in})
    SHOAL_RETURN_IF_ERROR(r.U64(v, "load"));
  return h;
}

Status EncodeStepWork(const StepWork& w, planner::LinkDType link, int64_t n_embd,
                      std::vector<uint8_t>* out) {
  ByteWriter b(out);
  PutCopies(b, w.swap_out);
  PutCopies(b, w.copies);
  PutCopies(b, w.swap_in);
  PutCopies(b, w.state_copies);
  const Batch& bt = w.batch;
  b.U32(static_cast<uint32_t>(bt.tokens.size()));
  for (int32_t t : bt.tokens) b.U32(static_cast<uint32_t>(t));
  b.U32(static_cast<uint32_t>(bt.chunks.size()));
  for (const SeqChunk& c : bt.chunks) {
    b.U64(static_cast<uint64_t>(c.seq_id));
    b.U32(static_cast<uint32_t>(c.row0));
    b.U32(static_cast<uint32_t>(c.n_tokens));
    b.U32(static_cast<uint32_t>(c.pos0));
    b.U32(static_cast<uint32_t>(c.tiled_until));
    b.U32(static_cast<uint32_t>(c.state_slot));  // -1 (none) as 0xffffffff
    b.U32(static_cast<uint32_t>(c.blocks.size()));
    for (int32_t blk : c.blocks) b.U32(static_cast<uint32_t>(blk));
  }
  b.U32(static_cast<uint32_t>(bt.out_rows.size()));
  for (int32_t r : bt.out_rows) b.U32(static_cast<uint32_t>(r));
  // Hidden rows: [planes][n_rows][n_embd] as the link type (each row encoded on its own); more
  // than one plane for architectures that carry more than the hidden state (Model::HiddenPlanes).
  b.U8(static_cast<uint8_t>(link));
  const int64_t n_rows = w.hidden.empty() ? 0 : static_cast<int64_t>(w.hidden.size()) / n_embd;
  b.U32(static_cast<uint32_t>(n_rows));
  if (n_rows == 0) return Status::Ok();
  const DType dt = link == planner::LinkDType::kF32   ? DType::kF32
                   : link == planner::LinkDType::kF16 ? DType::kF16
                                                      : DType::kQ8_0;
  const auto rb = RowBytes(dt, n_embd);
  if (!rb) return Errorf("hidden width {} does not fit the link type", n_embd);
  const uint64_t row_bytes = *rb;
  const size_t at = out->size();
  // Room for the stage times appended after it (AppendStageTimes; 64 stages before a second
  // allocation), so the rows are not copied again into a larger buffer.
  constexpr size_t kTimesRoom = 4 * 65;
  out->reserve(at + row_bytes * static_cast<uint64_t>(n_rows) + kTimesRoom);
  out->resize(at + row_bytes * static_cast<uint64_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r)
    kernels::Quantize(dt, w.hidden.data() + r * n_embd, out->data() + at + r * row_bytes, n_embd);
  return Status::Ok();
}

Status DecodeStepWork(std::span<const uint8_t> payload, int64_t n_embd, StepWork* w) {
  ByteReader r(payload);
  SHOAL_RETURN_IF_ERROR(GetCopies(r, &w->swap_out));
  SHOAL_RETURN_IF_ERROR(GetCopies(r, &w->copies));
  SHOAL_RETURN_IF_ERROR(GetCopies(r, &w->swap_in));
  SHOAL_RETURN_IF_ERROR(GetCopies(r, &w->state_copies));
  Batch& bt = w->batch;
  bt.Clear();
  uint32_t n = 0;
  SHOAL_RETURN_IF_ERROR(r.Count(&n, kMaxRows, 4, "tokens"));
  bt.tokens.resize(n);
  for (int32_t& t : bt.tokens) {
    uint32_t v = 0;
    SHOAL_RETURN_IF_ERROR(r.U32(&v, "token"));
    t = static_cast<int32_t>(v);
  }
  uint32_t n_chunks = 0;
  SHOAL_RETURN_IF_ERROR(r.Count(&n_chunks, kMaxRows, 32, "chunks"));
  w->block_storage.assign(n_chunks, {});
  int64_t next_row = 0;
  for (uint32_t i = 0; i < n_chunks; ++i) {
    SeqChunk c;
    uint64_t id = 0;
    uint32_t f[6] = {};
    SHOAL_RETURN_IF_ERROR(r.U64(&id, "seq id"));
    for (uint32_t& x : f) SHOAL_RETURN_IF_ERROR(r.U32(&x, "chunk field"));
    if (f[0] != next_row || f[1] == 0 || f[1] > kMaxRows || f[2] > (1u << 30) || f[3] > (1u << 30))
      return Errorf("chunk {} has a bad layout", i);
    auto& blocks = w->block_storage[i];
    if (f[4] != UINT32_MAX && f[4] >= kMaxStateSlots)
      return Errorf("chunk {}: state slot {} out of range", i, f[4]);
    if (f[5] > kMaxBlocks) return Errorf("chunk {}: too many blocks", i);
    blocks.resize(f[5]);
    for (int32_t& blk : blocks) {
      uint32_t v = 0;
      SHOAL_RETURN_IF_ERROR(r.U32(&v, "block id"));
      if (v >= kMaxBlocks) return Errorf("block id out of range");
      blk = static_cast<int32_t>(v);
    }
    c.seq_id = static_cast<int64_t>(id);
    c.row0 = static_cast<int32_t>(f[0]);
    c.n_tokens = static_cast<int32_t>(f[1]);
    c.pos0 = static_cast<int32_t>(f[2]);
    c.tiled_until = static_cast<int32_t>(f[3]);
    c.state_slot = f[4] == UINT32_MAX ? -1 : static_cast<int32_t>(f[4]);
    c.blocks = blocks;
    next_row += c.n_tokens;
    bt.chunks.push_back(c);
  }
  if (!bt.tokens.empty() && static_cast<int64_t>(bt.tokens.size()) != next_row)
    return Errorf("token count does not match the chunks");
  SHOAL_RETURN_IF_ERROR(r.Count(&n, kMaxRows, 4, "out rows"));
  bt.out_rows.resize(n);
  for (int32_t& o : bt.out_rows) {
    uint32_t v = 0;
    SHOAL_RETURN_IF_ERROR(r.U32(&v, "out row"));
    if (v >= next_row) return Errorf("out row {} beyond the batch", v);
    o = static_cast<int32_t>(v);
  }
  uint8_t link = 0;
  uint32_t n_rows = 0;
  SHOAL_RETURN_IF_ERROR(r.U8(&link, "link dtype"));
  SHOAL_RETURN_IF_ERROR(r.U32(&n_rows, "hidden rows"));
  w->hidden.clear();
  if (n_rows == 0) return r.ExpectEnd();
  if (next_row == 0 || n_rows % next_row != 0 || n_rows / next_row > kMaxHiddenPlanes || link > 2)
    return Errorf("{} hidden rows do not match the batch of {} rows", n_rows, next_row);
  const DType dt = link == 0 ? DType::kF32 : link == 1 ? DType::kF16 : DType::kQ8_0;
  const auto rb = RowBytes(dt, n_embd);
  if (!rb) return Errorf("hidden width {} does not fit the link type", n_embd);
  const uint64_t row_bytes = *rb;
  std::vector<uint8_t> raw(row_bytes * n_rows);
  SHOAL_RETURN_IF_ERROR(r.Bytes(raw, "hidden"));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd());
  // Room for a row class (kernels::ScratchRows): a buffer kept between steps (the node's) is
  // not reallocated, its pages faulted in again, at each longer prompt step.
  w->hidden.reserve(static_cast<size_t>(kernels::ScratchRows(n_rows)) *
                    static_cast<size_t>(n_embd));
  w->hidden.resize(static_cast<size_t>(n_rows) * static_cast<size_t>(n_embd));
  for (uint32_t i = 0; i < n_rows; ++i)
    kernels::Dequantize(dt, raw.data() + i * row_bytes, w->hidden.data() + i * n_embd, n_embd);
  return Status::Ok();
}

std::vector<uint8_t> EncodeLogits(std::span<const float> logits) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.F32Array(logits);
  return out;
}

Status DecodeLogits(std::span<const uint8_t> payload, size_t expected, std::vector<float>* out) {
  ByteReader r(payload);
  SHOAL_RETURN_IF_ERROR(r.F32Array(out, 1u << 30, "logits"));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd());
  if (out->size() != expected) return Errorf("expected {} logits, got {}", expected, out->size());
  return Status::Ok();
}

void AppendStageTimes(std::span<const uint32_t> us, std::vector<uint8_t>* out) {
  ByteWriter b(out);
  for (uint32_t t : us) b.U32(t);
  b.U32(static_cast<uint32_t>(us.size()));
}

Result<std::span<const uint8_t>> SplitStageTimes(std::span<const uint8_t> payload,
                                                 std::vector<uint32_t>* us) {
  if (payload.size() < 4) return Errorf("payload too short for its stage times");
  uint32_t n = 0;
  ByteReader tail(payload.subspan(payload.size() - 4));
  SHOAL_RETURN_IF_ERROR(tail.U32(&n, "stage time count"));
  if (n > kMaxStageTimes || (payload.size() - 4) / 4 < n)
    return Errorf("bad stage time count {}", n);
  const size_t body = payload.size() - 4 - 4 * static_cast<size_t>(n);
  ByteReader r(payload.subspan(body, 4 * static_cast<size_t>(n)));
  us->resize(n);
  for (uint32_t& t : *us) SHOAL_RETURN_IF_ERROR(r.U32(&t, "stage time"));
  return payload.subspan(0, body);
}

}  // namespace shoal::cluster
