# SS-Tools Agent's drawer in Superset: append this file to superset_config.py, below two settings:
#
#   SSTOOLS_AGENT_URL = "https://agent.example.com"  # where the /agent page is served
#   SSTOOLS_ENV_ID = "prod"  # this Superset's id in the agent's ENVIRONMENTS
#
# Every HTML page Superset serves then loads the drawer script from the agent. With Talisman on,
# its content security policy must also allow that origin in script-src and frame-src.
from html import escape as _sstools_escape
from typing import Any as _SstoolsAny

from flask_login import current_user as _sstools_current_user

# Read when Superset loads its configuration: a missing setting stops it there, by name.
_SSTOOLS_DRAWER_TAG = '<script src="{}/drawer.js" data-env="{}" defer></script></body>'.format(
    _sstools_escape(globals()["SSTOOLS_AGENT_URL"].rstrip("/")),
    _sstools_escape(globals()["SSTOOLS_ENV_ID"]),
).encode()


def FLASK_APP_MUTATOR(app: _SstoolsAny) -> _SstoolsAny:
    @app.after_request
    def sstools_drawer(response: _SstoolsAny) -> _SstoolsAny:
        # Whole HTML pages only: no API reply, file or stream is touched. And only for a person
        # signed in to Superset: the login page has nothing on screen to talk about.
        page = response.mimetype == "text/html" and response.status_code == 200 and not response.is_streamed
        if page and _sstools_current_user.is_authenticated:
            body = response.get_data()
            if b"</body>" in body:
                response.set_data(body.replace(b"</body>", _SSTOOLS_DRAWER_TAG, 1))
        return response

    return app
