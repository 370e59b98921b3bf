def render_html(result, summaries): return "<html></html>\n"
