from pagesight.cli import app

app(prog_name="pagesight")
