"""Notebook display of hbm's self-contained HTML pages."""
import html as _html


def iframe(page, height=640):
    """The page inside an iframe (srcdoc), so its styles and scripts stay out of the notebook."""
    return ('<iframe srcdoc="%s" style="width:100%%;height:%dpx;border:0" sandbox="allow-scripts"></iframe>'
            % (_html.escape(page, quote=True), height))
