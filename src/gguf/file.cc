// gguf::File: opening single and split (NAME-00001-of-0000N.gguf) files, metadata getters.
#include <fmt/format.h>

#include <charconv>
#include <new>
#include <optional>

#include "gguf/gguf.h"
#include "gguf/reader.h"

namespace shoal::gguf {
namespace {

struct SplitName {
  std::string prefix;  // path without "-00001-of-00003.gguf"
  int no = 0;          // 1-based
  int count = 0;
};

// Parses "PREFIX-NNNNN-of-MMMMM.gguf" (at least 5 digits each, as "%05d" prints).
std::optional<SplitName> ParseSplitName(const std::string& path) {
  constexpr std::string_view kExt = ".gguf";
  const size_t slash = path.find_last_of('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  if (path.size() < name_start + kExt.size() || !path.ends_with(kExt)) return std::nullopt;
  std::string_view stem(path.data() + name_start, path.size() - name_start - kExt.size());
  // Reads the run of digits ending at `end`; returns its start or npos.
  auto digits_before = [&](size_t end) -> size_t {
    size_t b = end;
    while (b > 0 && stem[b - 1] >= '0' && stem[b - 1] <= '9') --b;
    return (end - b >= 5 && end - b <= 9) ? b : std::string_view::npos;
  };
  const size_t count_start = digits_before(stem.size());
  if (count_start == std::string_view::npos || count_start < 4 ||
      stem.substr(count_start - 4, 4) != "-of-") {
    return std::nullopt;
  }
  const size_t no_start = digits_before(count_start - 4);
  if (no_start == std::string_view::npos || no_start < 2 || stem[no_start - 1] != '-') {
    return std::nullopt;
  }
  SplitName s;
  std::from_chars(stem.data() + no_start, stem.data() + count_start - 4, s.no);
  std::from_chars(stem.data() + count_start, stem.data() + stem.size(), s.count);
  s.prefix = path.substr(0, name_start + no_start - 1);
  return s;
}

// A split.* count: absent, or a non-negative integer.
Result<std::optional<uint64_t>> SplitKey(const SingleFile& f, const std::string& path,
                                         const char* key) {
  auto it = f.kv_index.find(key);
  if (it == f.kv_index.end()) return std::optional<uint64_t>();
  const Value& v = f.kv[it->second].second;
  if (!v.IsInteger() || v.AsInt() < 0) {
    return Errorf("{}: metadata key '{}' must be a non-negative integer, not {} {}", path, key,
                  v.TypeString(), v.ToString());
  }
  return std::optional<uint64_t>(static_cast<uint64_t>(v.AsInt()));
}

Result<std::unique_ptr<MappedFile>> ParseFile(const std::string& path, MapMode mode,
                                              SingleFile* out) {
  SHOAL_ASSIGN_OR_RETURN(auto map, MappedFile::Open(path, mode));
  Parser parser(path, map->data(), map->size());
  SHOAL_RETURN_IF_ERROR(parser.Parse(out));
  return map;
}

}  // namespace

std::string SplitPath(const std::string& prefix, int split_no, int split_count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, split_no, split_count);
}

uint64_t TensorInfo::row_bytes() const { return RowBytes(type, ne[0]).value_or(0); }

Result<std::unique_ptr<File>> File::OpenSingle(const std::string& path, MapMode mode) {
  try {
    SingleFile sf;
    SHOAL_ASSIGN_OR_RETURN(auto map, ParseFile(path, mode, &sf));
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    f->version_ = sf.version;
    f->alignment_ = sf.alignment;
    f->kv_ = std::move(sf.kv);
    f->kv_index_ = std::move(sf.kv_index);
    f->tensors_ = std::move(sf.tensors);
    f->tensor_index_ = std::move(sf.tensor_index);
    f->maps_.push_back(std::move(map));
    f->data_offsets_.push_back(sf.data_offset);
    return f;
  } catch (const std::bad_alloc&) {
    return Errorf("{}: out of memory while reading the GGUF header", path);
  }
}

Result<std::unique_ptr<File>> File::Open(const std::string& path, MapMode mode) {
  const std::optional<SplitName> name = ParseSplitName(path);
  if (!name || name->count <= 1) {
    SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<File> f, OpenSingle(path, mode));
    const uint64_t count = f->GetUintOr("split.count", 1);
    if (count > 1) {
      return Errorf(
          "{}: metadata says split.count = {} but the file name does not end in "
          "-00001-of-{:05d}.gguf, so the other shards cannot be found",
          path, count, count);
    }
    const Value* n = f->Find("split.tensors.count");
    if (n && n->AsInt() != static_cast<int64_t>(f->tensors_.size())) {
      return Errorf("{}: split.tensors.count = {} but the file holds {} tensors", path,
                    n->ToString(), f->tensors_.size());
    }
    return f;
  }
  if (name->no != 1) {
    return Errorf("{}: this is shard {} of {}; open the first shard '{}'", path, name->no,
                  name->count, SplitPath(name->prefix, 1, name->count));
  }
  try {
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    std::optional<uint64_t> tensors_count;
    for (int i = 0; i < name->count; ++i) {
      const std::string shard = i == 0 ? path : SplitPath(name->prefix, i + 1, name->count);
      SingleFile sf;
      SHOAL_ASSIGN_OR_RETURN(auto map, ParseFile(shard, mode, &sf));
      SHOAL_ASSIGN_OR_RETURN(std::optional<uint64_t> count, SplitKey(sf, shard, "split.count"));
      SHOAL_ASSIGN_OR_RETURN(std::optional<uint64_t> no, SplitKey(sf, shard, "split.no"));
      SHOAL_ASSIGN_OR_RETURN(std::optional<uint64_t> n, SplitKey(sf, shard, "split.tensors.count"));
      if (count != static_cast<uint64_t>(name->count)) {
        return Errorf("{}: split.count is {} but the file name says {} shards", shard,
                      count ? std::to_string(*count) : "missing", name->count);
      }
      if (no != static_cast<uint64_t>(i)) {
        return Errorf(
            "{}: split.no is {} but this is shard {} of {} (split.no counts from 0, "
            "expected {})",
            shard, no ? std::to_string(*no) : "missing", i + 1, name->count, i);
      }
      if (n) {
        if (tensors_count && *tensors_count != *n) {
          return Errorf("{}: split.tensors.count is {} but shard 1 says {}", shard, *n,
                        *tensors_count);
        }
        tensors_count = n;
      }
      if (i == 0) {
        f->version_ = sf.version;
        f->alignment_ = sf.alignment;
        f->kv_ = std::move(sf.kv);
        f->kv_index_ = std::move(sf.kv_index);
      }
      for (TensorInfo& t : sf.tensors) {
        if (f->tensor_index_.count(t.name)) {
          return Errorf("{}: tensor '{}' is also in shard {}", shard, Printable(t.name),
                        f->tensors_[f->tensor_index_[t.name]].file_index + 1);
        }
        t.file_index = i;
        f->tensor_index_.emplace(t.name, f->tensors_.size());
        f->tensors_.push_back(std::move(t));
      }
      f->maps_.push_back(std::move(map));
      f->data_offsets_.push_back(sf.data_offset);
    }
    if (tensors_count && *tensors_count != f->tensors_.size()) {
      return Errorf("{}: split.tensors.count is {} but the {} shards hold {} tensors", path,
                    *tensors_count, name->count, f->tensors_.size());
    }
    return f;
  } catch (const std::bad_alloc&) {
    return Errorf("{}: out of memory while reading the GGUF headers", path);
  }
}

void File::DropPages(const uint8_t* p, uint64_t n) const {
  for (const auto& m : maps_)
    if (m->Contains(p)) m->DropPages(p, n);
}

bool File::InPageCache(const uint8_t* p, uint64_t n) const {
  for (const auto& m : maps_)
    if (m->Contains(p))
      return m->mode() == MapMode::kMap && n <= static_cast<uint64_t>(m->data() + m->size() - p);
  return false;
}

uint64_t File::file_bytes() const {
  uint64_t n = 0;
  for (const auto& m : maps_) n += m->size();
  return n;
}

const Value* File::Find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// The value of `key`, or an error naming the file and key.
Result<const Value*> Lookup(const File& f, const std::string& key) {
  const Value* v = f.Find(key);
  if (!v) return Errorf("{}: metadata key '{}' not found", f.path(), key);
  return v;
}

Status WrongType(const File& f, const std::string& key, const Value& v, const char* want) {
  return Errorf("{}: metadata key '{}' is {} {}, expected {}", f.path(), key, v.TypeString(),
                v.ToString(), want);
}

bool IsNumber(const Value& v) { return v.IsInteger() || v.IsFloat(); }

}  // namespace

Result<std::string> File::GetString(const std::string& key) const {
  SHOAL_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kString) return WrongType(*this, key, *v, "a string");
  return v->str;
}

Result<uint64_t> File::GetUint(const std::string& key) const {
  SHOAL_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (!v->IsInteger()) return WrongType(*this, key, *v, "an unsigned integer");
  if (v->type == ValueType::kU8 || v->type == ValueType::kU16 || v->type == ValueType::kU32 ||
      v->type == ValueType::kU64) {
    return v->u;
  }
  if (v->i < 0) return WrongType(*this, key, *v, "an unsigned integer");
  return static_cast<uint64_t>(v->i);
}

Result<double> File::GetFloat(const std::string& key) const {
  SHOAL_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (!IsNumber(*v)) return WrongType(*this, key, *v, "a number");
  return v->AsDouble();
}

Result<bool> File::GetBool(const std::string& key) const {
  SHOAL_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kBool) return WrongType(*this, key, *v, "a bool");
  return v->b;
}

std::string File::GetStringOr(const std::string& key, const std::string& dflt) const {
  auto r = GetString(key);
  return r.ok() ? std::move(r).value() : dflt;
}

uint64_t File::GetUintOr(const std::string& key, uint64_t dflt) const {
  auto r = GetUint(key);
  return r.ok() ? *r : dflt;
}

double File::GetFloatOr(const std::string& key, double dflt) const {
  auto r = GetFloat(key);
  return r.ok() ? *r : dflt;
}

bool File::GetBoolOr(const std::string& key, bool dflt) const {
  auto r = GetBool(key);
  return r.ok() ? *r : dflt;
}

Result<std::vector<std::string>> File::GetStringArray(const std::string& key) const {
  SHOAL_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kString) {
    return WrongType(*this, key, *v, "an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(v->arr.size());
  for (const Value& e : v->arr) out.push_back(e.str);
  return out;
}

Result<std::vector<double>> File::GetNumberArray(const std::string& key) const {
  SHOAL_ASSIGN_OR_RETURN(const Value* v, Lookup(*this, key));
  // Integers, floats and bools convert; strings and nested arrays do not.
  if (v->type != ValueType::kArray || v->elem_type == ValueType::kString ||
      v->elem_type == ValueType::kArray) {
    return WrongType(*this, key, *v, "an array of numbers");
  }
  std::vector<double> out;
  out.reserve(v->arr.size());
  for (const Value& e : v->arr) out.push_back(e.AsDouble());
  return out;
}

}  // namespace shoal::gguf
