"""Text stage: a page's text with pixel boxes (PDF text layer, OCR or a given transcription), its
language, layout regions and headings."""
