def leftpad(text, width, fill=" "):
    return fill * max(0, width - len(text)) + text
