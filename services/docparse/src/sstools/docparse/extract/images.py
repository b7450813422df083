import io

from PIL import Image, UnidentifiedImageError

from sstools.docparse.model import ErrorCode, Extraction, Kind, ParseFailure

# A 10 MB PNG can declare billions of pixels; Pillow raises DecompressionBombError past this.
Image.MAX_IMAGE_PIXELS = 50_000_000


def extract_image(content: bytes, kind: Kind) -> Extraction:
    """Images are described, not read: size and mode, for the agent to mention."""
    try:
        with Image.open(io.BytesIO(content)) as image:
            image.verify()
        with Image.open(io.BytesIO(content)) as image:
            size, mode = image.size, image.mode
    except Image.DecompressionBombError as error:
        raise ParseFailure(ErrorCode.TOO_LARGE, f"the image is too large: {error}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the image cannot be read: {error!s:.200}") from None
    return Extraction(
        kind,
        text=f"{kind.value.upper()} image, {size[0]}×{size[1]} pixels, mode {mode}",
        parts=1,
        image_size=size,
        image_mode=mode,
    )
