// Per-tensor hashes, stage tensor selection, and the fetch of a stage's tensors into a sparse
// cached GGUF file (node) or out of the coordinator's mmapped model (coordinator).
#include "cluster/model_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "base/log.h"
#include "cluster/wire.h"
#include "model/arch/arch.h"

namespace shoal::cluster {

namespace {

using net::ByteReader;
using net::ByteWriter;

// Data frames carry at most 4 MiB: one frame buffer on the node (well inside a 256 MiB node and
// the 256 MiB frame limit), ~34 ms of a 1 Gb/s link, so progress is steady.
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;
constexpr uint32_t kHeaderItem = 0xFFFFFFFFu;
constexpr uint32_t kMaxTensors = 1u << 20;
// A fetch must complete within this long per data frame (a stalled coordinator fails it).
constexpr int64_t kDataTimeoutMs = 60'000;

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Layer of "blk.N.*", or -1.
int64_t LayerOf(const std::string& name) {
  if (!StartsWith(name, "blk.")) return -1;
  int64_t v = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) v = v * 10 + (name[i] - '0');
  return v;
}

// RAII file descriptor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status PwriteAll(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) return Errorf("{}: write failed: {}", path, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> ReadHeader(const std::string& path, uint64_t n) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return Errorf("{}: {}", path, std::strerror(errno));
  std::vector<uint8_t> buf(n);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(f.fd, buf.data() + got, n - got, static_cast<off_t>(got));
    if (r <= 0) return Errorf("{}: short read of the header", path);
    got += static_cast<size_t>(r);
  }
  return buf;
}

std::vector<uint8_t> EncodeFetch(bool header, const std::vector<uint32_t>& items) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U8(static_cast<uint8_t>(ControlType::kFetch));
  w.U8(header ? 1 : 0);
  w.U32Array(items);
  return out;
}

// Asks the coordinator for the header and/or tensors `items` (manifest indices) and writes each
// data frame into `fd` at the item's place: header at 0, tensor i at its file offset.
Status Fetch(const FetchLink& coord, bool header, const std::vector<uint32_t>& items,
             const ModelManifest& m, const gguf::File* layout, int fd, const std::string& path) {
  net::Frame req;
  req.type = net::MsgType::kControl;
  req.payload = EncodeFetch(header, items);
  SHOAL_RETURN_IF_ERROR(coord.conn->Send(req));
  uint64_t received = 0;
  for (;;) {
    auto f = coord.recv ? coord.recv(kDataTimeoutMs) : coord.conn->Recv(kDataTimeoutMs);
    if (!f.ok()) return f.status().Annotate("fetching the model from the coordinator");
    if (!*f) return Errorf("the coordinator sent no model data for {} ms", kDataTimeoutMs);
    if ((*f)->type != net::MsgType::kControl) continue;  // heartbeats
    const std::vector<uint8_t>& p = (*f)->payload;
    SHOAL_ASSIGN_OR_RETURN(ControlType t, ControlTypeOf(p));
    if (t == ControlType::kFetchDone) break;
    if (t != ControlType::kData) return Errorf("unexpected control message during a fetch");
    ByteReader r(std::span<const uint8_t>(p).subspan(1));
    uint32_t item = 0;
    uint64_t off = 0;
    SHOAL_RETURN_IF_ERROR(r.U32(&item, "item"));
    SHOAL_RETURN_IF_ERROR(r.U64(&off, "offset"));
    const uint64_t n = r.remaining();
    const uint8_t* bytes = p.data() + 1 + r.offset();
    // Place and bounds come from our own view of the file, never from the message.
    uint64_t base = 0, size = 0;
    if (item == kHeaderItem) {
      if (!header) return Errorf("the coordinator sent a header that was not asked for");
      size = m.data_offset;
    } else {
      if (!layout || item >= layout->tensors().size() ||
          std::find(items.begin(), items.end(), item) == items.end())
        return Errorf("the coordinator sent tensor {} that was not asked for", item);
      const gguf::TensorInfo& ti = layout->tensors()[item];
      base = layout->data_offset() + ti.offset;
      size = ti.nbytes;
    }
    if (off > size || n > size - off) return Errorf("model data beyond its tensor");
    SHOAL_RETURN_IF_ERROR(PwriteAll(fd, bytes, n, base + off, path));
    received += n;
  }
  Log(LogLevel::kInfo, "received {:.1f} MiB of model data",
      static_cast<double>(received) / 1048576);
  return Status::Ok();
}

}  // namespace

std::string ModelManifest::Id() const {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  uint8_t le[8];
  net::StoreLE64(le, header_hash);
  XXH3_64bits_update(s, le, sizeof le);
  for (const TensorHash& t : tensors) {
    XXH3_64bits_update(s, t.name.data(), t.name.size());
    net::StoreLE64(le, t.hash);
    XXH3_64bits_update(s, le, sizeof le);
  }
  const uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return Hex64(h);
}

uint64_t HashTensor(const gguf::TensorInfo& t, const gguf::File* drop) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  uint8_t desc[36];
  net::StoreLE32(desc, static_cast<uint32_t>(t.type));
  for (int i = 0; i < 4; ++i) net::StoreLE64(desc + 4 + 8 * i, static_cast<uint64_t>(t.ne[i]));
  XXH3_64bits_update(s, desc, sizeof desc);
  constexpr uint64_t kChunk = uint64_t{16} << 20;
  for (uint64_t at = 0; at < t.nbytes; at += kChunk) {
    const uint64_t n = std::min(kChunk, t.nbytes - at);
    XXH3_64bits_update(s, t.data + at, n);
    if (drop) drop->DropPages(t.data + at, n);
  }
  const uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

Result<ModelManifest> BuildManifest(const gguf::File& f) {
  ModelManifest m;
  for (const gguf::TensorInfo& t : f.tensors()) m.tensors.push_back({t.name, HashTensor(t)});
  if (f.num_files() == 1) {
    m.file_bytes = f.file_bytes();
    m.data_offset = f.data_offset();
    SHOAL_ASSIGN_OR_RETURN(auto h, ReadHeader(f.path(), m.data_offset));
    m.header_hash = XXH3_64bits(h.data(), h.size());
  }
  return m;
}

void PutManifest(ByteWriter& w, const ModelManifest& m) {
  w.U64(m.file_bytes);
  w.U64(m.data_offset);
  w.U64(m.header_hash);
  w.U32(static_cast<uint32_t>(m.tensors.size()));
  for (const TensorHash& t : m.tensors) {
    w.String(t.name);
    w.U64(t.hash);
  }
}

Status GetManifest(ByteReader& r, ModelManifest* m) {
  SHOAL_RETURN_IF_ERROR(r.U64(&m->file_bytes, "file bytes"));
  SHOAL_RETURN_IF_ERROR(r.U64(&m->data_offset, "data offset"));
  SHOAL_RETURN_IF_ERROR(r.U64(&m->header_hash, "header hash"));
  if (m->data_offset > m->file_bytes) return Errorf("manifest: header beyond the file");
  uint32_t n = 0;
  SHOAL_RETURN_IF_ERROR(r.Count(&n, kMaxTensors, 12, "tensor hashes"));
  m->tensors.resize(n);
  for (TensorHash& t : m->tensors) {
    SHOAL_RETURN_IF_ERROR(r.String(&t.name, 1024, "tensor name"));
    SHOAL_RETURN_IF_ERROR(r.U64(&t.hash, "tensor hash"));
  }
  return Status::Ok();
}

std::vector<const gguf::TensorInfo*> StageTensors(const gguf::File& f, int32_t first, int32_t last,
                                                  int32_t n_layer) {
  const bool first_stage = first == 0, last_stage = last == n_layer;
  const bool tied = f.FindTensor("output.weight") == nullptr;
  std::vector<const gguf::TensorInfo*> out;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const int64_t l = LayerOf(t.name);
    bool need;
    if (l >= 0) {
      need = l >= first && l < last;
    } else if (t.name == "token_embd.weight") {
      need = first_stage || (last_stage && tied);
    } else if (StartsWith(t.name, "output_norm.") || StartsWith(t.name, "output.")) {
      need = last_stage;
    } else {
      need = !StartsWith(t.name, "blk.");
    }
    if (need) out.push_back(&t);
  }
  return out;
}

Status VerifyStageTensors(const gguf::File& f, const ModelManifest& m, int32_t first, int32_t last,
                          int32_t n_layer, bool drop_pages) {
  std::map<std::string, uint64_t> want;
  for (const TensorHash& t : m.tensors) want[t.name] = t.hash;
  // Every tensor the coordinator's model gives this stage must be in this file...
  for (const TensorHash& t : m.tensors) {
    if (f.FindTensor(t.name)) continue;
    const int64_t l = LayerOf(t.name);
    if (l >= first && l < last)
      return Errorf("{}: tensor {} is missing (not the coordinator's model)", f.path(), t.name);
  }
  // ...and each one this file's stage reads must hash as the coordinator's does.
  for (const gguf::TensorInfo* t : StageTensors(f, first, last, n_layer)) {
    auto it = want.find(t->name);
    if (it == want.end())
      return Errorf("{}: tensor {} is not in the coordinator's model", f.path(), t->name);
    const uint64_t h = HashTensor(*t, drop_pages ? &f : nullptr);
    if (h != it->second)
      return Errorf(
          "{}: tensor {} differs from the coordinator's (xxh3 {} here, {} there): not the same "
          "model file",
          f.path(), t->name, Hex64(h), Hex64(it->second));
  }
  return Status::Ok();
}

Result<std::string> EnsureCachedFile(const ModelManifest& m, const std::string& cache_dir,
                                     const FetchLink& coord) {
  if (m.file_bytes == 0)
    return Errorf(
        "the node lacks the model file and the coordinator's model is split in "
        "several files, which cannot be sent: copy it to --model-dir");
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) return Errorf("cache folder {}: {}", cache_dir, ec.message());
  // The name is derived here from hashes: a message can never name a path.
  const std::string path = cache_dir + "/" + m.Id() + ".gguf";
  if (!std::filesystem::exists(path)) {
    const std::string part = path + ".part";
    Fd fd{::open(part.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (fd.fd < 0) return Errorf("{}: {}", part, std::strerror(errno));
    // Sparse: only the header and the tensors that arrive take disk blocks.
    if (::ftruncate(fd.fd, static_cast<off_t>(m.file_bytes)) != 0)
      return Errorf("{}: {}", part, std::strerror(errno));
    SHOAL_RETURN_IF_ERROR(Fetch(coord, true, {}, m, nullptr, fd.fd, part));
    SHOAL_ASSIGN_OR_RETURN(auto h, ReadHeader(part, m.data_offset));
    if (XXH3_64bits(h.data(), h.size()) != m.header_hash)
      return Errorf("the model header received from the coordinator does not match its hash");
    if (::rename(part.c_str(), path.c_str()) != 0)
      return Errorf("{}: {}", path, std::strerror(errno));
  }
  return path;
}

Status FetchStageTensors(const ModelManifest& m, const std::string& path, int32_t first,
                         int32_t last, const FetchLink& coord) {
  // Which of the stage's tensors are missing (holes read as zeros) or wrong in the cache file.
  std::vector<uint32_t> missing;
  {
    SHOAL_ASSIGN_OR_RETURN(auto gf, gguf::File::OpenSingle(path));
    SHOAL_ASSIGN_OR_RETURN(HParams hp, LoadHParams(*gf));
    if (gf->tensors().size() != m.tensors.size())
      return Errorf("{}: tensor table differs from the coordinator's", path);
    for (const gguf::TensorInfo* t : StageTensors(*gf, first, last, hp.n_layer)) {
      const auto i = static_cast<uint32_t>(t - gf->tensors().data());
      if (m.tensors[i].name != t->name) return Errorf("{}: tensor order differs", path);
      if (HashTensor(*t) != m.tensors[i].hash) missing.push_back(i);
    }
    if (!missing.empty()) {
      Fd fd{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
      if (fd.fd < 0) return Errorf("{}: {}", path, std::strerror(errno));
      SHOAL_RETURN_IF_ERROR(Fetch(coord, false, missing, m, gf.get(), fd.fd, path));
    }
  }
  if (!missing.empty()) {
    SHOAL_ASSIGN_OR_RETURN(auto gf, gguf::File::OpenSingle(path));
    SHOAL_ASSIGN_OR_RETURN(HParams hp, LoadHParams(*gf));
    if (Status s = VerifyStageTensors(*gf, m, first, last, hp.n_layer); !s.ok())
      return s.Annotate("after receiving the tensors");
  } else {
    Log(LogLevel::kInfo, "stage tensors found in the cache {}", path);
  }
  return Status::Ok();
}

Status ServeFetch(const gguf::File& f, const std::string& path, std::span<const uint8_t> payload,
                  net::Conn& node) {
  ByteReader r(payload.subspan(1));
  uint8_t header = 0;
  std::vector<uint32_t> items;
  SHOAL_RETURN_IF_ERROR(r.U8(&header, "header flag"));
  SHOAL_RETURN_IF_ERROR(r.U32Array(&items, kMaxTensors, "tensors"));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd("fetch request"));
  if (f.num_files() != 1) return Errorf("a split model cannot be sent");
  auto send = [&](uint32_t item, const uint8_t* p, uint64_t n) -> Status {
    for (uint64_t off = 0; off < n || (n == 0 && off == 0); off += kChunkBytes) {
      const uint64_t len = std::min(kChunkBytes, n - off);
      net::Frame d;
      d.type = net::MsgType::kControl;
      ByteWriter w(&d.payload);
      w.U8(static_cast<uint8_t>(ControlType::kData));
      w.U32(item);
      w.U64(off);
      w.Bytes(std::span<const uint8_t>(p + off, len));
      SHOAL_RETURN_IF_ERROR(node.Send(d));
      if (n == 0) break;
    }
    return Status::Ok();
  };
  if (header) {
    SHOAL_ASSIGN_OR_RETURN(auto h, ReadHeader(path, f.data_offset()));
    SHOAL_RETURN_IF_ERROR(send(kHeaderItem, h.data(), h.size()));
  }
  uint64_t total = 0;
  for (uint32_t i : items) {
    if (i >= f.tensors().size()) return Errorf("fetch of tensor {}: no such tensor", i);
    const gguf::TensorInfo& t = f.tensors()[i];
    SHOAL_RETURN_IF_ERROR(send(i, t.data, t.nbytes));
    total += t.nbytes;
  }
  net::Frame done;
  done.type = net::MsgType::kControl;
  done.payload = {static_cast<uint8_t>(ControlType::kFetchDone)};
  SHOAL_RETURN_IF_ERROR(node.Send(done));
  if (!items.empty())
    Log(LogLevel::kInfo, "sent {} tensors ({:.1f} MiB) to a node", items.size(),
        static_cast<double>(total) / 1048576);
  return Status::Ok();
}

}  // namespace shoal::cluster
