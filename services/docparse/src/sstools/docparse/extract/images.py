"""Images: described (size and mode), and the text in them read with Tesseract — a screenshot of a
broken chart says its error, a photo of a table its numbers. Runs in a parser worker, so the
recognition shares its memory limit (an rlimit, inherited) and stops within its own time."""

import io
import os
import shutil
import subprocess

from PIL import Image, ImageOps, UnidentifiedImageError

from sstools.docparse.model import ErrorCode, Extraction, Kind, Limits, ParseFailure

# A 10 MB PNG can declare billions of pixels; Pillow raises DecompressionBombError past this.
Image.MAX_IMAGE_PIXELS = 50_000_000
# Tesseract reads text best at 20-40 px letters: a small screenshot is enlarged to this width,
# a big photo shrunk to this side (its time grows with the pixels).
_SMALL_WIDTH = 1200
_LARGEST_SIDE = 4000


def extract_image(content: bytes, kind: Kind, limits: Limits) -> Extraction:
    try:
        with Image.open(io.BytesIO(content)) as image:
            image.verify()
        with Image.open(io.BytesIO(content)) as image:
            size, mode = image.size, image.mode
            extraction = Extraction(kind, parts=1, image_size=size, image_mode=mode)
            tesseract = _tesseract(limits, extraction.warnings)
            page = _for_reading(image) if tesseract else b""
    except Image.DecompressionBombError as error:
        raise ParseFailure(ErrorCode.TOO_LARGE, f"the image is too large: {error}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the image cannot be read: {error!s:.200}") from None
    described = f"{kind.value.upper()} image, {size[0]}×{size[1]} pixels, mode {mode}"
    read = _recognised(tesseract, page, limits, extraction.warnings) if tesseract else ""
    if read:
        extraction.text = extraction.cut_text(f"{described}. Text in the image:\n{read}", limits)
    else:
        extraction.text = f"{described}. No text was read in it."
    return extraction


def _tesseract(limits: Limits, warnings: list[str]) -> str | None:
    """Tesseract's path, when the text is to be read and it is installed (else why not)."""
    if not limits.ocr_languages:
        return None
    binary = shutil.which("tesseract")
    if binary is None:
        warnings.append("the text in the image was not read: Tesseract is not installed")
    return binary


def _for_reading(image: Image.Image) -> bytes:
    """The image as Tesseract reads it best: upright, grey, letters of a readable size — a
    small one enlarged, a big one shrunk, never a side past _LARGEST_SIDE (the file decides its
    proportions: a 1-pixel-wide strip must not be enlarged to billions of pixels)."""
    page = ImageOps.exif_transpose(image).convert("L")
    grow = max(1.0, _SMALL_WIDTH / page.width)
    scale = min(grow, _LARGEST_SIDE / max(page.size))
    if scale != 1.0:
        wanted = (max(1, round(page.width * scale)), max(1, round(page.height * scale)))
        page = page.resize(wanted, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    page.save(out, format="PNG")
    return out.getvalue()


def _recognised(binary: str, page: bytes, limits: Limits, warnings: list[str]) -> str:
    """The text Tesseract reads in ``page``; "" (and a warning) when it cannot."""
    command = [binary, "stdin", "stdout", "-l", limits.ocr_languages, "--psm", "3"]
    # one thread: the worker's share of the machine, and a time that does not depend on it
    environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        done = subprocess.run(
            command, input=page, capture_output=True, timeout=limits.ocr_seconds, env=environment, check=False
        )
    except subprocess.TimeoutExpired:
        warnings.append(f"the text in the image was not read within {limits.ocr_seconds:g} s")
        return ""
    if done.returncode != 0:
        problem = done.stderr.decode(errors="replace").strip().splitlines()
        warnings.append(f"the text in the image was not read: {(problem or ['Tesseract failed'])[-1]:.200}")
        return ""
    lines = (" ".join(line.split()) for line in done.stdout.decode(errors="replace").splitlines())
    return "\n".join(line for line in lines if line)
