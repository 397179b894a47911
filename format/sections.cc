#include "hexir/format/sections.h"

#include <zstd.h>

#include <string>

namespace hexir::format {
namespace {

std::string section_label(uint64_t index) { return "section " + std::to_string(index); }

struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

}  // namespace

Result<SectionBuffer> SectionBuffer::allocate(uint64_t size) {
  SectionBuffer buffer;
  if (size == 0) return buffer;
  if (size > SIZE_MAX) return resource_exhausted("cannot allocate " + std::to_string(size) + " bytes");
  void* p = ::operator new (static_cast<size_t>(size), std::align_val_t{64}, std::nothrow);
  if (!p) return resource_exhausted("cannot allocate " + std::to_string(size) + " bytes");
  buffer.data_.reset(static_cast<uint8_t*>(p));
  buffer.size_ = size;
  return buffer;
}

Result<std::vector<uint8_t>> compress_section(std::span<const uint8_t> raw, int level) {
  std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  if (!cctx) return resource_exhausted("cannot create a zstd compression context");
  if (level < 1 || level > ZSTD_maxCLevel())
    return invalid_argument("zstd level " + std::to_string(level) + " is outside 1.." +
                            std::to_string(ZSTD_maxCLevel()));
  auto set = [&](ZSTD_cParameter p, int v) { return ZSTD_CCtx_setParameter(cctx.get(), p, v); };
  if (ZSTD_isError(set(ZSTD_c_compressionLevel, level)) || ZSTD_isError(set(ZSTD_c_checksumFlag, 1)) ||
      ZSTD_isError(set(ZSTD_c_contentSizeFlag, 1)))
    return invalid_argument("zstd level " + std::to_string(level) + " is not supported");
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) return internal_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

Result<SectionBuffer> decompress_section(std::span<const uint8_t> stored, uint64_t raw_size, uint64_t index) {
  const std::string what = section_label(index);
  // One frame, covering every stored byte: no trailing garbage, no second frame.
  const size_t frame = ZSTD_findFrameCompressedSize(stored.data(), stored.size());
  if (ZSTD_isError(frame))
    return data_loss(what + ": not a complete zstd frame (" + ZSTD_getErrorName(frame) + ")");
  if (frame != stored.size())
    return data_loss(what + ": the zstd frame is " + std::to_string(frame) +
                     " bytes but the section stores " + std::to_string(stored.size()));
  const unsigned long long content = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (content == ZSTD_CONTENTSIZE_ERROR) return data_loss(what + ": bad zstd frame header");
  if (content == ZSTD_CONTENTSIZE_UNKNOWN)
    return data_loss(what + ": the zstd frame does not record its content size");
  if (content != raw_size)
    return data_loss(what + ": the zstd frame holds " + std::to_string(content) + " bytes but raw_size is " +
                     std::to_string(raw_size));
  HEXIR_ASSIGN_OR_RETURN(SectionBuffer buffer, SectionBuffer::allocate(raw_size));
  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return resource_exhausted("cannot create a zstd decompression context");
  const size_t n = ZSTD_decompressDCtx(dctx.get(), buffer.data(), static_cast<size_t>(raw_size),
                                       stored.data(), stored.size());
  if (ZSTD_isError(n)) return data_loss(what + ": corrupt zstd data (" + ZSTD_getErrorName(n) + ")");
  if (n != raw_size)
    return data_loss(what + ": zstd data decompressed to " + std::to_string(n) + " bytes, expected " +
                     std::to_string(raw_size));
  return buffer;
}

Status decompress_sections(VerifiedModule& module, std::vector<SectionBuffer>& owned,
                           uint64_t max_raw_bytes) {
  const auto* sections = module.module->sections();
  if (!sections) return ok_status();
  uint64_t total = 0;
  for (flatbuffers::uoffset_t i = 0; i < sections->size(); ++i) {
    const fb::Section& s = *sections->Get(i);
    if (s.compression() == fb::Compression::Zstd &&
        (__builtin_add_overflow(total, s.raw_size(), &total) || total > max_raw_bytes))
      return resource_exhausted("zstd sections decompress to more than the limit of " +
                                std::to_string(max_raw_bytes) + " bytes");
  }
  for (flatbuffers::uoffset_t i = 0; i < sections->size(); ++i) {
    const fb::Section& s = *sections->Get(i);
    if (s.compression() != fb::Compression::Zstd) continue;
    HEXIR_ASSIGN_OR_RETURN(SectionBuffer raw, decompress_section(module.sections[i], s.raw_size(), i));
    module.sections[i] = raw.span();
    owned.push_back(std::move(raw));
  }
  return ok_status();
}

}  // namespace hexir::format
