// libjpeg reports errors by calling error_exit, which must not return: the standard pattern
// is setjmp/longjmp. longjmp must not skip a C++ destructor, so every function that calls
// setjmp below (the *_guarded ones) has only trivially destructible locals, keeps its state
// in Impl, and reports failure by return value; the public methods turn it into DecodeError.
#include "data/jpeg_decoder.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

namespace dlperf::data {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  c->err->format_message(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1): a premature end of the data (a truncated file), or of a data segment (an
// end-of-image marker met while rows are still owed: a cut file with its marker restored, or a
// frame header claiming more pixels than the data holds, which libjpeg filled with grey and
// counted as a good image) are errors, as PIL's are; the others (extraneous bytes before a
// marker, ...) decode fine and are ignored.
void on_message(j_common_ptr c, int level) {
  if (level < 0 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER)) on_error(c);
}

// The decoded-pixel buffer grows to the largest whole image seen, up to this: beyond it, to the
// rows the crop needs. Sized by the header's claim, a 2.5 kB file declaring 65,000 x 65,000
// pixels made every loader thread allocate 12 GB.
constexpr size_t kPixelCapacityCap = size_t{64} << 20;

}  // namespace

struct JpegDecoder::Impl {
  jpeg_decompress_struct d{};
  ErrorManager err{};
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t scan_start = 0;  // offset of the first entropy-coded byte
  std::vector<uint8_t> pixels;    // the decoded region, RGB
  std::vector<uint8_t> cmyk_row;  // one CMYK row before conversion
  std::vector<JSAMPROW> rows;

  Impl() {
    // Room for a 1024x1024 image from the start: a thread that has not met the largest image
    // yet does not allocate when it does (ImageNet's are mostly around 500x375).
    pixels.reserve(1024 * 1024 * 3);
    cmyk_row.reserve(1024 * 4);
    rows.reserve(1024);
    d.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    jpeg_create_decompress(&d);
  }
  ~Impl() { jpeg_destroy_decompress(&d); }

  bool header_guarded(JpegHeader* out) {
    if (setjmp(err.jump)) return false;
    jpeg_abort_decompress(&d);  // ready for a new image (a no-op on a fresh object)
    jpeg_mem_src(&d, data, static_cast<unsigned long>(size));
    jpeg_read_header(&d, TRUE);
    scan_start = size - d.src->bytes_in_buffer;
    out->width = static_cast<int>(d.image_width);
    out->height = static_cast<int>(d.image_height);
    out->components = d.num_components;
    out->progressive = d.progressive_mode != 0;
    return true;
  }

  bool decode_guarded(const CropBox* crop, int min_w, int min_h, DecodedRegion* out) {
    if (setjmp(err.jump)) return false;
    int denom = 1;
    while (denom < 8 && crop->w / (2 * denom) >= min_w && crop->h / (2 * denom) >= min_h) denom *= 2;
    d.scale_num = 1;
    d.scale_denom = static_cast<unsigned>(denom);
    const bool cmyk = d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK;
    d.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg converts greyscale and YCbCr to RGB
    jpeg_start_decompress(&d);

    // The crop in decoded pixels, and the whole rows/columns covering it.
    const double rx = static_cast<double>(d.output_width) / d.image_width;
    const double ry = static_cast<double>(d.output_height) / d.image_height;
    const double cx = crop->x * rx, cy = crop->y * ry, cw = crop->w * rx, ch = crop->h * ry;
    const auto x0 = static_cast<JDIMENSION>(std::floor(cx));
    const auto x1 = std::min(d.output_width, static_cast<JDIMENSION>(std::ceil(cx + cw)));
    const auto y0 = static_cast<JDIMENSION>(std::floor(cy));
    const auto y1 = std::min(d.output_height, static_cast<JDIMENSION>(std::ceil(cy + ch)));
    JDIMENSION xoff = x0, width = std::max<JDIMENSION>(1, x1 - x0);
    if (xoff > 0 || width < d.output_width) jpeg_crop_scanline(&d, &xoff, &width);  // xoff moves left to an iMCU boundary
    const JDIMENSION height = std::max<JDIMENSION>(1, y1 - y0);
    const size_t stride = static_cast<size_t>(width) * 3;
    // Buffers sized for the whole image at full scale, not just this crop: the capacity then
    // stops growing once the largest image has been seen, whatever the later crops.
    const size_t whole = std::min(static_cast<size_t>(d.image_width) * d.image_height * 3, kPixelCapacityCap);
    if (pixels.size() < std::max(stride * height, whole)) pixels.resize(std::max(stride * height, whole));
    if (cmyk && cmyk_row.size() < static_cast<size_t>(d.output_width) * 4) cmyk_row.resize(static_cast<size_t>(d.output_width) * 4);
    if (y0 > 0) jpeg_skip_scanlines(&d, y0);

    if (!cmyk) {
      if (rows.size() < height) rows.resize(height);
      for (JDIMENSION r = 0; r < height; ++r) rows[r] = pixels.data() + r * stride;
      JDIMENSION done = 0;
      while (done < height) done += jpeg_read_scanlines(&d, rows.data() + done, height - done);
    } else {
      // Adobe writes CMYK inverted (0 = full ink), which is what nearly every CMYK JPEG is.
      const bool inverted = d.saw_Adobe_marker;
      for (JDIMENSION r = 0; r < height; ++r) {
        JSAMPROW in = cmyk_row.data();
        jpeg_read_scanlines(&d, &in, 1);  // a memory source never suspends
        uint8_t* o = pixels.data() + r * stride;
        for (JDIMENSION x = 0; x < width; ++x) {
          int c = in[4 * x], m = in[4 * x + 1], y = in[4 * x + 2], k = in[4 * x + 3];
          if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
          o[3 * x] = static_cast<uint8_t>(c * k / 255);
          o[3 * x + 1] = static_cast<uint8_t>(m * k / 255);
          o[3 * x + 2] = static_cast<uint8_t>(y * k / 255);
        }
      }
    }
    jpeg_abort_decompress(&d);  // rows below the crop are never decoded
    out->rgb = pixels.data();
    out->width = static_cast<int>(width);
    out->height = static_cast<int>(height);
    out->stride = stride;
    out->crop_x = cx - xoff;
    out->crop_y = cy - y0;
    out->crop_w = cw;
    out->crop_h = ch;
    out->scale_denom = denom;
    out->image_width = static_cast<int>(d.image_width);
    out->image_height = static_cast<int>(d.image_height);
    return true;
  }

  // A truncated file may still decode a crop that ends above the missing part: the end-of-
  // image marker after the entropy-coded data tells. (0xFF 0xD9 cannot occur inside it:
  // entropy-coded 0xFF bytes are followed by 0x00 or a restart marker.)
  bool has_end_marker() const {
    for (size_t i = size; i >= scan_start + 2; --i)
      if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) return true;
    return false;
  }
};

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {}
JpegDecoder::~JpegDecoder() = default;

JpegHeader JpegDecoder::read_header(const uint8_t* data, size_t size) {
  impl_->data = data;
  impl_->size = size;
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) throw DecodeError("not a JPEG file (no start-of-image marker)");
  JpegHeader h;
  if (!impl_->header_guarded(&h)) throw DecodeError(std::string("bad JPEG header: ") + impl_->err.message);
  if (h.width <= 0 || h.height <= 0) throw DecodeError("JPEG with an empty image");
  if (!impl_->has_end_marker()) throw DecodeError("truncated JPEG (no end-of-image marker)");
  return h;
}

DecodedRegion JpegDecoder::decode(const CropBox& crop, int min_w, int min_h) {
  DecodedRegion r;
  if (!impl_->decode_guarded(&crop, std::max(1, min_w), std::max(1, min_h), &r)) {
    jpeg_abort_decompress(&impl_->d);
    const std::string m = impl_->err.message;  // libjpeg's warnings say "Corrupt JPEG data: ..." themselves
    throw DecodeError(m.rfind("Corrupt JPEG data", 0) == 0 ? m : "corrupt JPEG data: " + m);
  }
  return r;
}

}  // namespace dlperf::data
