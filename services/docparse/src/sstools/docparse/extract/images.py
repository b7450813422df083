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
            page = _for_reading(image)
    except Image.DecompressionBombError as error:
        raise ParseFailure(ErrorCode.TOO_LARGE, f"the image is too large: {error}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the image cannot be read: {error!s:.200}") from None
    described = f"{kind.value.upper()} image, {size[0]}×{size[1]} pixels, mode {mode}"
    extraction = Extraction(kind, parts=1, image_size=size, image_mode=mode)
    read = _recognised(page, limits, extraction.warnings)
    if read:
        extraction.text = extraction.cut_text(f"{described}. Text in the image:\n{read}", limits)
    else:
        extraction.text = f"{described}. No text was read in it."
    return extraction


def _for_reading(image: Image.Image) -> bytes:
    """The image as Tesseract reads it best: upright, grey, letters of a readable size."""
    page = ImageOps.exif_transpose(image).convert("L")
    if page.width < _SMALL_WIDTH:
        scale = _SMALL_WIDTH / page.width
        page = page.resize((_SMALL_WIDTH, max(1, round(page.height * scale))), Image.Resampling.LANCZOS)
    page.thumbnail((_LARGEST_SIDE, _LARGEST_SIDE))
    out = io.BytesIO()
    page.save(out, format="PNG")
    return out.getvalue()


def _recognised(page: bytes, limits: Limits, warnings: list[str]) -> str:
    """The text Tesseract reads in ``page``; "" (and a warning) when it cannot."""
    if not limits.ocr_languages:
        return ""
    binary = shutil.which("tesseract")
    if binary is None:
        warnings.append("the text in the image was not read: Tesseract is not installed")
        return ""
    command = [binary, "stdin", "stdout", "-l", limits.ocr_languages, "--psm", "3"]
    # one thread: the worker's share of the machine, and a time that does not depend on it
    environment = {"PATH": os.environ.get("PATH", ""), "OMP_THREAD_LIMIT": "1"}
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
