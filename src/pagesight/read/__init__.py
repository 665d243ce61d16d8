"""Read stage: text with pixel boxes from the PDF text layer or from OCR."""
